"""Hostile-input cases: loading (run by tests/test_hostile.py through tests/hostile_harness.py).

Broken MODEL folders (config.json and weights files) and ``--checkpoint`` files, built from tiny models in
each case's folder (tests/loading_folders.py). Every case that could allocate without bound runs under a
memory limit. Not here: a weights file without read permission (the tests run as root, whom chmod does not
stop from reading).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import gguf_files as gf
from tests import loading_folders as lf
from tests.hostile_harness import Hostile

RUN = ("--max-samples", "2", "--batch-size", "2")
MEMORY_GIB = 5.0  # torch and transformers alone take ~3.6 GiB of address space
SLOW_S = 180.0  # a build that runs away is killed (and fails the case) after this long


def _spectrum(model: str, *extra: str) -> tuple[str, ...]:
    return ("spectrum", model, *RUN, *extra)


def _timm(**args: Any) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        lf.timm_folder(tmp / "m", **args)

    return setup


def _hf(**config: Any) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        lf.hf_folder(tmp / "m", **config)

    return setup


def _then(make: Callable[[Path], None], change: Callable[[Path], Any]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        make(tmp)
        change(tmp)

    return setup


def _config_text(text: str) -> Callable[[Path], Any]:
    return lambda tmp: (tmp / "m" / "config.json").write_text(text)


def _weights(change: Callable[[Path], Any]) -> Callable[[Path], Any]:
    return lambda tmp: change(tmp / "m" / "model.safetensors")


def _copy_weights(change: Callable[[Path], Any]) -> Callable[[Path], Any]:
    def setup(tmp: Path) -> None:
        (tmp / "w.safetensors").write_bytes((tmp / "m" / "model.safetensors").read_bytes())
        change(tmp / "w.safetensors")

    return setup


def _weights_dir(tmp: Path) -> None:
    (tmp / "m" / "model.safetensors").unlink()
    (tmp / "m" / "model.safetensors").mkdir()


def _no_weights(tmp: Path) -> None:
    (tmp / "m" / "model.safetensors").unlink()


def _unsafe(tmp: Path) -> None:
    lf.unsafe_bin(tmp / "m", tmp / "pwned")  # a new file "pwned" would fail the case


def _index(text: str) -> Callable[[Path], None]:
    def change(tmp: Path) -> None:
        (tmp / "m" / "model.safetensors").unlink()
        (tmp / "m" / "model.safetensors.index.json").write_text(text)

    return change


def _deep_metadata(tmp: Path) -> None:
    (tmp / "m" / "metadata.json").write_text('{"conditioning": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _text_model(tmp: Path) -> None:
    (tmp / "notes.txt").write_text("not a model")


def _corrupt_cases() -> list[Hostile]:
    cases = []
    for name, corrupt in sorted(lf.CORRUPTIONS.items()):
        for kind, make in (("timm", _timm()), ("hf", _hf())):
            cases.append(
                Hostile(
                    f"load-{kind}-safetensors-{name}",
                    _spectrum("{tmp}/m"),
                    2,
                    "model.safetensors is not a readable safetensors file",
                    setup=_then(make, _weights(corrupt)),
                )
            )
        cases.append(
            Hostile(
                f"load-checkpoint-safetensors-{name}",
                _spectrum("{tmp}/m", "--weights", "random", "--checkpoint", "{tmp}/w.safetensors"),
                2,
                "w.safetensors is not a readable safetensors file",
                setup=_then(_timm(), _copy_weights(corrupt)),
            )
        )
    return cases


def _track_run(*names: str, state: str | None = None) -> Callable[[Path], None]:
    """Tiny GPT-2 checkpoint folders {tmp}/NAME (``state``: the first one's trainer_state.json text)."""

    def setup(tmp: Path) -> None:
        for name in names:
            lf.hf_folder(tmp / name)
        if state is not None:
            (tmp / names[0] / "trainer_state.json").write_text(state)

    return setup


def _track_cases() -> list[Hostile]:
    """`condcli track` (issue 20): folders that hold no checkpoint, steps that cannot be told apart or read,
    checkpoints of two architectures, options that choose other weights, standard input read twice."""
    run = _track_run("run/checkpoint-1", "run/checkpoint-2")
    state = ("run/checkpoint-1",)
    track = ("track", "{tmp}/run", *RUN)
    cases = [
        Hostile("load-track-missing", ("track", "{tmp}/nope"), 2, "nope: no such folder"),
        Hostile("load-track-file", ("track", "{tmp}/notes.txt"), 2, "is a file, not a", setup=_text_model),
        Hostile("load-track-empty-run", track, 2, "holds no checkpoint", setup=lambda t: (t / "run").mkdir()),
        Hostile("load-track-no-step", ("track", "{tmp}/m"), 2, "training step is unknown", setup=_hf()),
        Hostile(
            "load-track-name-digits",
            ("track", "{tmp}/c" + "9" * 40),
            2,
            "training step is unknown",
            setup=_track_run("c" + "9" * 40),
        ),
        Hostile(
            "load-track-same-step",
            ("track", "{tmp}/a/checkpoint-5", "{tmp}/b/checkpoint-5", *RUN),
            2,
            "are both step 5",
            setup=_track_run("a/checkpoint-5", "b/checkpoint-5"),
        ),
        Hostile(
            "load-track-mixed-architectures",
            track,
            2,
            "is not the architecture of",
            setup=_then(_track_run("run/checkpoint-1"), lambda t: lf.timm_folder(t / "run" / "checkpoint-2")),
        ),
        Hostile(
            "load-track-mixed-sizes",
            track,
            2,
            "its config.json has n_layer 2, not 1",
            setup=_then(
                run, lambda t: lf.edit_config(t / "run" / "checkpoint-2", lambda c: c.update(n_layer=2))
            ),
        ),
        Hostile(
            "load-track-weights", (*track, "--weights", "random"), 2, "does not apply to track", setup=run
        ),
        Hostile(
            "load-track-stdin-twice",
            (*track, "--text", "-"),
            2,
            "can be read only once",
            setup=run,
            stdin=b"hello\n",
        ),
        Hostile("load-track-valid", track, 0, "", setup=run),
    ]
    for name, text, says in (
        ("garbage", "{not json", "trainer_state.json: invalid JSON"),
        ("no-step", '{"global_step": "ten"}', "has no global_step"),
        ("huge-step", '{"global_step": 1' + "0" * 5000 + "}", "thousands of digits"),
        ("deep", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ):
        cases.append(
            Hostile(f"load-track-state-{name}", track, 2, says, setup=_track_run(*state, state=text))
        )
    return cases


def _gguf(**options: Any) -> Callable[[Path], None]:
    """A tiny Llama as {tmp}/m.gguf (tests/gguf_files.py), Q8_0 (``options``: write_llama's)."""

    def setup(tmp: Path) -> None:
        gf.write_llama(gf.tiny_llama(), tmp / "m.gguf", "Q8_0", **options)

    return setup


def _gguf_bytes(data: bytes) -> Callable[[Path], None]:
    return lambda tmp: (tmp / "m.gguf").write_bytes(data)


def _cut(keep: Callable[[Path], int]) -> Callable[[Path], Any]:
    """{tmp}/m.gguf cut to its first ``keep(file)`` bytes."""

    def change(tmp: Path) -> None:
        file = tmp / "m.gguf"
        file.write_bytes(file.read_bytes()[: keep(file)])

    return change


def _in_tensor_table(file: Path) -> int:
    """A length that ends inside the last entry of the tensor table (its 53 bytes end at most 31 bytes of
    alignment before the data)."""
    from gguf import GGUFReader

    return int(GGUFReader(str(file)).data_offset) - 40


def _gguf_cases() -> list[Hostile]:
    """Issue 31: GGUF files whose header lies (counts, lengths, offsets past the end), cut short, of an
    architecture transformers cannot read, or missing a tensor; refused before anything is sized by them."""
    one_u32 = struct.pack("<I", 4) + struct.pack("<I", 7)  # value type u32, value 7
    tensor_past_end = gf.raw_header(
        1, 1, gf.architecture_kv() + gf.tensor_entry("token_embd.weight", (32, 300), 0, 1 << 40)
    )
    cases = [
        ("truncated-header", _then(_gguf(), _cut(_in_tensor_table)), "ends inside its header"),
        (
            "truncated-counts",
            _then(_gguf(), _cut(lambda f: 200)),
            "claims 21 tensors, more than the 184 bytes left can hold",
        ),
        (
            "truncated-data",
            _then(_gguf(), _cut(lambda f: f.stat().st_size - 1000)),
            "lies past the end of the file",
        ),
        ("2e40-tensors", _gguf_bytes(gf.raw_header(1 << 40, 0)), "claims 1099511627776 tensors"),
        ("2e40-keys", _gguf_bytes(gf.raw_header(0, 1 << 40)), "claims 1099511627776 metadata keys"),
        (
            "2e60-string",
            _gguf_bytes(gf.raw_header(0, 1, struct.pack("<Q", 1 << 60) + b"general.architecture")),
            "claims 1152921504606846976 bytes",
        ),
        (
            "2e40-array",
            _gguf_bytes(gf.raw_header(0, 1, gf.string("a") + struct.pack("<IIQ", 9, 4, 1 << 40) + one_u32)),
            "claims 1099511627776 elements",
        ),
        ("offset-past-end", _gguf_bytes(tensor_past_end), "lies past the end of the file"),
        ("not-gguf", _gguf_bytes(b"not a model at all"), "does not start with the bytes GGUF"),
        ("empty", _gguf_bytes(b""), "does not start with the bytes GGUF"),
        ("v1", _gguf_bytes(gf.raw_header(0, 0, version=1)), "it is version 1"),
        ("no-architecture", _gguf_bytes(gf.raw_header(0, 0)), "names no general.architecture"),
        ("1e8-blocks", _gguf(block_count=100_000_000), "num_hidden_layers = 100000000"),
        ("unknown-architecture", _gguf(architecture="nosucharch"), "cannot read from GGUF"),
        (
            "missing-tensor",
            _gguf(drop="blk.1.ffn_up.weight"),
            "holds no tensor for model.layers.1.mlp.up_proj",
        ),
    ]
    return [
        Hostile(
            f"load-gguf-{name}",
            _spectrum("{tmp}/m.gguf"),
            2,
            says,
            setup=setup,
            memory_gib=MEMORY_GIB,
            timeout_s=SLOW_S,
        )
        for name, setup, says in cases
    ] + [
        Hostile("load-gguf-missing", _spectrum("{tmp}/nope.gguf"), 2, "nope.gguf: no such file"),
        Hostile("load-gguf-valid", _spectrum("{tmp}/m.gguf"), 0, "", setup=_gguf()),
    ]


CASES: list[Hostile] = [
    # item 4: absurd sizes are estimated on the meta device and refused before anything is allocated
    Hostile(
        "load-timm-depth-1e8",
        _spectrum("{tmp}/m"),
        2,
        "config.json asks for a model of about",
        setup=_timm(depth=100_000_000),
        memory_gib=MEMORY_GIB,
        timeout_s=SLOW_S,
    ),
    Hostile(
        "load-hf-n-layer-1e7",
        _spectrum("{tmp}/m", "--weights", "random"),
        2,
        "n_layer = 10000000",
        setup=_hf(n_layer=10_000_000),
        memory_gib=MEMORY_GIB,
        timeout_s=SLOW_S,
    ),
    Hostile(
        "load-hf-n-embd-1e9",
        _spectrum("{tmp}/m"),
        2,
        "config.json asks for a model of at least",
        setup=_hf(n_embd=1_000_000_000, n_head=1),
        memory_gib=MEMORY_GIB,
        timeout_s=SLOW_S,
    ),
    Hostile(
        "load-timm-embed-dim-1e6",
        _spectrum("{tmp}/m", "--device", "cpu"),
        2,
        "more than the",
        setup=_timm(embed_dim=1_000_000, num_heads=1),
        memory_gib=MEMORY_GIB,
        timeout_s=SLOW_S,
    ),
    # item 6: config values of the wrong type or sign, an unknown architecture, config.json not a config
    Hostile("load-hf-n-embd-str", _spectrum("{tmp}/m"), 2, "'n_embd' is 'big'", setup=_hf(n_embd="big")),
    Hostile("load-hf-n-embd-neg", _spectrum("{tmp}/m"), 2, "'n_embd' is -5", setup=_hf(n_embd=-5)),
    Hostile("load-hf-n-embd-float", _spectrum("{tmp}/m"), 2, "not a positive integer", setup=_hf(n_embd=1e9)),
    Hostile("load-hf-n-layer-neg", _spectrum("{tmp}/m"), 2, "'n_layer' is -5", setup=_hf(n_layer=-5)),
    Hostile(
        "load-hf-eps-str", _spectrum("{tmp}/m"), 2, "layer_norm_epsilon", setup=_hf(layer_norm_epsilon="x")
    ),
    Hostile("load-timm-depth-str", _spectrum("{tmp}/m"), 2, "'model_args.depth'", setup=_timm(depth="12")),
    Hostile("load-timm-unknown-kwarg", _spectrum("{tmp}/m"), 2, "unexpected keyword", setup=_timm(foo=1)),
    Hostile(
        "load-timm-unknown-arch",
        _spectrum("{tmp}/m"),
        2,
        "'architecture' 'vit_nope' is not a timm model",
        setup=_then(
            _timm(), lambda tmp: lf.edit_config(tmp / "m", lambda c: c.update(architecture="vit_nope"))
        ),
    ),
    Hostile(
        "load-hf-model-type-unknown",
        _spectrum("{tmp}/m"),
        2,
        "nosuchtype",
        setup=_hf(model_type="nosuchtype"),
    ),
    Hostile(
        "load-config-list",
        _spectrum("{tmp}/m"),
        2,
        "not a JSON object",
        setup=_then(_hf(), _config_text("[]")),
    ),
    Hostile(
        "load-config-null",
        _spectrum("{tmp}/m"),
        2,
        "not a JSON object",
        setup=_then(_hf(), _config_text("null")),
    ),
    Hostile(
        "load-config-not-json",
        _spectrum("{tmp}/m"),
        2,
        "invalid JSON",
        setup=_then(_hf(), _config_text("{x")),
    ),
    Hostile(
        "load-config-deep",
        _spectrum("{tmp}/m"),
        2,
        "config.json: it is nested too deeply",
        setup=_then(_hf(), _config_text("[" * 100_000 + "]" * 100_000)),
    ),
    Hostile(
        "load-metadata-deep",
        _spectrum("{tmp}/m"),
        2,
        "metadata.json: it is nested too deeply",
        setup=_then(_timm(), _deep_metadata),
    ),
    # item 6: broken weights files in a MODEL folder (and the same via --checkpoint)
    *_corrupt_cases(),
    Hostile("load-hf-unsafe-bin", _spectrum("{tmp}/m"), 2, "refusing to load", setup=_then(_hf(), _unsafe)),
    Hostile(
        "load-timm-unsafe-bin", _spectrum("{tmp}/m"), 2, "refusing to load", setup=_then(_timm(), _unsafe)
    ),
    Hostile(
        "load-hf-no-weights", _spectrum("{tmp}/m"), 2, "no weights file", setup=_then(_hf(), _no_weights)
    ),
    Hostile(
        "load-timm-weights-dir", _spectrum("{tmp}/m"), 2, "is a folder", setup=_then(_timm(), _weights_dir)
    ),
    Hostile(
        "load-hf-shape-mismatch",
        _spectrum("{tmp}/m"),
        2,
        "has shape [32, 128], the model expects [32, 64]",
        setup=_then(_hf(), lambda tmp: lf.edit_config(tmp / "m", lambda c: c.update(n_inner=64))),
    ),
    Hostile(
        "load-timm-int8-weight", _spectrum("{tmp}/m"), 2, "I8 in", setup=_then(_timm(), _weights(lf.to_int8))
    ),
    Hostile(
        "load-hf-index-empty", _spectrum("{tmp}/m"), 2, "no 'weight_map'", setup=_then(_hf(), _index("{}"))
    ),
    Hostile(
        "load-hf-shard-missing",
        _spectrum("{tmp}/m"),
        2,
        "model-1.safetensors (named in",
        setup=_then(_hf(), _index('{"weight_map": {"wte.weight": "model-1.safetensors"}}')),
    ),
    # item 20: a non-finite weight is the file's fault, named with it; a folder as --checkpoint
    Hostile(
        "load-timm-inf-weight", _spectrum("{tmp}/m"), 2, "NaN/Inf", setup=_then(_timm(), _weights(lf.poison))
    ),
    Hostile(
        "load-hf-nan-weight",
        _spectrum("{tmp}/m"),
        2,
        "model.safetensors)",
        setup=_then(_hf(), _weights(lambda f: lf.poison(f, float("nan")))),
    ),
    Hostile(
        "load-checkpoint-folder",
        _spectrum("{tmp}/m", "--weights", "random", "--checkpoint", "{tmp}/m"),
        2,
        "is a folder, not a weights file",
        setup=_timm(),
    ),
    Hostile("load-model-txt", _spectrum("{tmp}/notes.txt"), 2, "is not a model folder", setup=_text_model),
    # issue 18: --device-map / --max-memory, parsed strictly (tests/test_big_model.py has the rest)
    Hostile(
        "load-device-map-unknown",
        _spectrum("{tmp}/m", "--device-map", "gpu"),
        2,
        "is not known",
        setup=_timm(),
    ),
    Hostile(
        "load-max-memory-huge",
        _spectrum("{tmp}/m", "--device-map", "auto", "--max-memory", "cpu=" + "9" * 400),
        2,
        "more than 1 PiB",
        setup=_timm(),
    ),
    Hostile(
        "load-max-memory-no-fit",
        _spectrum("{tmp}/m", "--device-map", "auto", "--max-memory", "cpu=1KB"),
        2,
        "add disk to --max-memory",
        setup=_timm(),
    ),
    *_track_cases(),
    *_gguf_cases(),
    # a valid folder still loads (the checks cost no behaviour)
    Hostile("load-timm-valid", _spectrum("{tmp}/m"), 0, "", setup=_timm()),
]
