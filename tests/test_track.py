"""`condcli track`: checkpoints of a tiny BERT (an HF Trainer run with condcli.monitor's ConditioningCallback)
and a tiny HF ViT, each trained a few optimizer steps, tracked against the step; every number against a
float64 NumPy recomputation from that checkpoint's own ``hidden_states`` / ``output_attentions`` / weights on
the same inputs, and against the values the callback logged at that step — never against track's output."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result

from condcli.analysis.track import discover
from condcli.errors import InputError
from tests.helpers import DTYPE_EPS, np_kappa, np_reported_kappa
from tests.hostile_inputs_setup import VOCAB

F32 = DTYPE_EPS["float32"]
LINES = ["hello world", "a b c d e f", "hello s world a z", "z y x w v"]
BERT_STEPS = (2, 4, 6)
VIT_STEPS = (2, 5, 10)  # saved as ckpt-2, ckpt-5, ckpt-10: no trainer_state.json, steps from the names


def _state(folder: Path, step: int) -> None:
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))


class Lines(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """LINES tokenized one by one (unpadded), each with a label."""

    def __init__(self, tok: Any) -> None:
        self.items = [{**tok(line), "label": i % 2} for i, line in enumerate(LINES)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.items[i]


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An HF Trainer's output_dir: checkpoint-2/4/6 (model, tokenizer, trainer_state.json) of a 2-layer BERT
    classifier trained with condcli.monitor.ConditioningCallback logging every 2 steps on its probe batch
    (the first 4 training samples: LINES); the Trainer's log_history is kept in ../log_history.json."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from condcli.monitor import ConditioningCallback

    root = tmp_path_factory.mktemp("bert") / "run"
    vocab = root.parent / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    tok = BertTokenizer(str(vocab))
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    args = TrainingArguments(
        str(root),
        max_steps=max(BERT_STEPS),
        save_steps=2,
        per_device_train_batch_size=2,
        learning_rate=3e-2,
        logging_steps=100,
        report_to=[],
        seed=0,
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=BertForSequenceClassification(cfg),
        args=args,
        train_dataset=Lines(tok),
        data_collator=DataCollatorWithPadding(tok),
        processing_class=tok,
        callbacks=[ConditioningCallback(every_n_steps=2, max_samples=len(LINES))],
    )
    trainer.train()
    (root.parent / "log_history.json").write_text(json.dumps(trainer.state.log_history))
    (root.parent / "probe.txt").write_text("\n".join(LINES) + "\n")
    return root


def _bert_reference(folder: Path) -> dict[str, Any]:
    """Per sample (one line each, no padding): κ(X) from hidden_states[0], per layer κ(X_l) from
    hidden_states[l], H(P) from output_attentions and μ(LA) from the weights' head slices."""
    from transformers import BertModel, BertTokenizer

    tok = BertTokenizer.from_pretrained(folder)
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    out: dict[str, Any] = {"x": [], "layers": {}}
    for line in LINES:
        with torch.no_grad():
            r = model(**tok(line, return_tensors="pt"), output_hidden_states=True, output_attentions=True)
        out["x"].append(np_reported_kappa(r.hidden_states[0][0].double().numpy(), F32))
        for i, block in enumerate(model.encoder.layer):
            x = r.hidden_states[i][0].double().numpy()  # BERT is post-norm: the attention reads X_l itself
            p = r.attentions[i][0].double().numpy()  # (H, N, N)
            plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
            entropy = (-plogp.sum(-1) / np.log(p.shape[-1])).mean(-1).min()
            att = block.attention.self
            heads = att.num_attention_heads
            w = [m.weight.detach().double().numpy().T for m in (att.query, att.key, att.value)]  # d × H·d_h
            slices = [np.stack(np.split(m, heads, axis=1)) for m in w]  # (H, d, d_h) each
            k_a = float(np_reported_kappa(x, F32))
            mu = max(float(np.prod([np_kappa(s[h]) for s in slices])) * k_a**3 for h in range(heads))
            layer = out["layers"].setdefault(i, {"kappa": [], "attention_entropy": [], "mu_la": []})
            layer["kappa"].append(k_a)
            layer["attention_entropy"].append(entropy)
            layer["mu_la"].append(mu)
    return out


def test_every_checkpoint_against_its_hidden_states_and_the_callback_log(
    bert_run: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    text = str(bert_run.parent / "probe.txt")
    r = cli_json("track", str(bert_run), "--text", text)
    history = json.loads((bert_run.parent / "log_history.json").read_text())
    assert r["command"] == "track" and r["schema_version"] == 1 and r["tool"]["name"] == "condcli"
    assert r["track"]["steps"] == list(BERT_STEPS)
    assert r["inputs"]["count"] == len(LINES) and r["model"]["checkpoints"] == 3
    seen = []
    for step, point in zip(BERT_STEPS, r["track"]["checkpoints"], strict=True):
        assert point["step"] == step and point["step_from"] == "trainer_state.json"
        assert Path(point["path"]) == bert_run / f"checkpoint-{step}"
        ref = _bert_reference(Path(point["path"]))
        report = point["report"]
        np.testing.assert_allclose(report["embedding"]["kappa"]["per_sample"], ref["x"], rtol=1e-9)
        assert report["embedding"]["kappa"]["median"] == pytest.approx(np.median(ref["x"]), rel=1e-9)
        assert [layer["index"] for layer in report["layers"]] == [0, 1]
        for layer in report["layers"]:
            want = ref["layers"][layer["index"]]
            for key in ("kappa", "attention_entropy", "mu_la"):
                np.testing.assert_allclose(layer[key]["per_sample"], want[key], rtol=1e-5, err_msg=key)
        seen.append(ref["x"])
        # condcli.monitor's callback logged the same at this step, on the same probe samples
        logged = next(e for e in history if e.get("step") == step and "condcli/kappa_x" in e)
        assert report["embedding"]["kappa"]["median"] == pytest.approx(logged["condcli/kappa_x"], rel=1e-9)
        for layer in report["layers"]:
            for key in ("kappa", "mu_la", "attention_entropy"):
                want = logged[f"condcli/layer_{layer['index']}/{key}"]
                assert layer[key]["median"] == pytest.approx(want, rel=1e-6), key
    # the checkpoints really differ: the test cannot pass by analysing one of them three times
    assert not np.allclose(seen[0], seen[-1], rtol=1e-6)


def test_a_run_folder_and_its_checkpoints_named_in_any_order_agree(
    bert_run: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    args = ("--max-samples", "2", "--layers", "-1")
    whole = cli_json("track", str(bert_run), *args)
    named = cli_json("track", *(str(bert_run / f"checkpoint-{s}") for s in (6, 2, 4)), *args)
    assert whole["track"] == named["track"] and whole["track"]["steps"] == list(BERT_STEPS)
    assert named["model"]["spec"] == " ".join(str(bert_run / f"checkpoint-{s}") for s in (6, 2, 4))


def test_steps_from_folder_names_sort_as_numbers(bert_run: Path, tmp_path: Path) -> None:
    for name, step in (("ckpt10", 6), ("ckpt2", 2), ("step_9", 4)):
        shutil.copytree(bert_run / f"checkpoint-{step}", tmp_path / name)
        (tmp_path / name / "trainer_state.json").unlink()
    shutil.copytree(bert_run / "checkpoint-2", tmp_path / "checkpoint-3")  # trainer_state.json wins: 40
    _state(tmp_path / "checkpoint-3", 40)
    named = [tmp_path / n for n in ("ckpt10", "ckpt2", "step_9", "checkpoint-3")]
    found = discover(named)
    assert [(c.step, c.path.name, c.step_from) for c in found] == [
        (2, "ckpt2", "folder name"),
        (9, "step_9", "folder name"),
        (10, "ckpt10", "folder name"),
        (40, "checkpoint-3", "trainer_state.json"),
    ]
    assert [c.step for c in discover([tmp_path])] == [40]  # a run folder: only its checkpoint-* folders


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda t: t / "nope", "no such folder"),
        (lambda t: (t / "f.txt").write_text("x") and t / "f.txt", "is a file, not a checkpoint folder"),
        (lambda t: (t / "run").mkdir() or t / "run", "holds no checkpoint"),
    ],
)
def test_discover_refuses(tmp_path: Path, make: Callable[[Path], Path], says: str) -> None:
    with pytest.raises(InputError, match=says):
        discover([make(tmp_path)])


def test_repeated_or_garbled_steps_are_refused(bert_run: Path, tmp_path: Path) -> None:
    shutil.copytree(bert_run / "checkpoint-2", tmp_path / "again-2")
    with pytest.raises(InputError, match="are both step 2"):
        discover([bert_run, tmp_path / "again-2"])
    for text, says in (("{not json", "invalid JSON"), ('{"global_step": -1}', "has no global_step")):
        (tmp_path / "again-2" / "trainer_state.json").write_text(text)
        with pytest.raises(InputError, match=says):
            discover([tmp_path / "again-2"])


def test_a_checkpoint_of_another_shape_is_one_error_line(
    bert_run: Path, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    """Same config.json architecture keys, another vocabulary: found when the second checkpoint loads."""
    from transformers import BertConfig, BertModel

    shutil.copytree(bert_run / "checkpoint-2", tmp_path / "checkpoint-2")
    cfg = BertConfig.from_pretrained(bert_run / "checkpoint-2")
    cfg.vocab_size += 3
    BertModel(cfg).save_pretrained(tmp_path / "checkpoint-4")
    result = cli("track", str(tmp_path), "--max-samples", "1", "--layers", "none")
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "is not the architecture of" in line
    n = len(VOCAB)
    assert f"embeddings.word_embeddings.weight is {n + 3}×16, not {n}×16" in line


def test_table_and_out_files(bert_run: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    out = tmp_path / "out"
    text = str(bert_run.parent / "probe.txt")
    result = cli("track", str(bert_run), "--text", text, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        ".condcli-manifest.json",
        "report.html",
        "report.json",
        "track.png",
    ]
    r = json.loads((out / "report.json").read_text())
    assert (out / "track.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "checkpoint-6" in html
    # the page's κ(X) and κ(X_l) charts draw the report's medians at its steps (full precision in data-*)
    points = r["track"]["checkpoints"]
    for chart_id, series in (
        ("track-kappa-x", [[p["report"]["embedding"]["kappa"]["median"] for p in points]]),
        ("track-kappa", [[p["report"]["layers"][i]["kappa"]["median"] for p in points] for i in (0, 1)]),
    ):
        chart = re.search(f'<svg[^>]*id="{chart_id}".*?</figure>', html, re.S)
        assert chart is not None, chart_id
        xs = re.findall(r'data-xs="([^"]*)"', chart.group(0))
        ys = [[float(v) for v in found.split()] for found in re.findall(r'data-ys="([^"]*)"', chart.group(0))]
        assert set(xs) == {" ".join(f"{float(s)!r}" for s in BERT_STEPS)}
        assert ys[: len(series)] == series
    # one row per checkpoint, in step order: κ(X), then κ(X_l), μ(LA), H(P) of layers 0 and 1, each the
    # report's median at three significant digits
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == len(BERT_STEPS)
    for row, point in zip(rows, r["track"]["checkpoints"], strict=True):
        cells = [c.strip() for c in row.split("│")[1:-1]]
        report = point["report"]
        medians = [report["embedding"]["kappa"]["median"]]
        medians += [
            layer[k]["median"] for layer in report["layers"] for k in ("kappa", "mu_la", "attention_entropy")
        ]
        assert cells == [str(point["step"]), *(f"{float(v):.3g}" for v in medians)]


@pytest.fixture(scope="module")
def vit_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ckpt-2, ckpt-5, ckpt-10 of a 2-layer HF ViT (32×32 px) trained a few AdamW steps, each with its image
    processor and no trainer_state.json: the steps come from the folder names."""
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    root = tmp_path_factory.mktemp("vit") / "run"
    torch.manual_seed(0)
    cfg = ViTConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        image_size=32,
        patch_size=8,
    )
    model = ViTModel(cfg)
    processor = ViTImageProcessor(size={"height": 32, "width": 32})
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2)
    pixels = torch.randn(4, 3, 32, 32)
    for step in range(1, max(VIT_STEPS) + 1):
        model(pixel_values=pixels).last_hidden_state.pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        if step in VIT_STEPS:
            model.save_pretrained(root / f"ckpt-{step}")
            processor.save_pretrained(root / f"ckpt-{step}")
    return root


def _vit_folders(root: Path) -> list[str]:
    """The checkpoint folders, named out of step order (ckpt-10 before ckpt-2 as text)."""
    return sorted(str(p) for p in root.iterdir())


def _vit_kappas(folder: Path, pixels: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """κ(X) from hidden_states[0] and κ(X_1) from hidden_states[1] per image, NumPy float64."""
    from transformers import ViTModel

    model = ViTModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        hs = model(pixel_values=pixels, output_hidden_states=True).hidden_states
    return tuple(np_reported_kappa(h.double().numpy(), F32) for h in (hs[0], hs[1]))  # type: ignore[return-value]


def test_vit_checkpoints_on_images(
    vit_run: Path, tmp_path: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    from PIL import Image
    from transformers import ViTImageProcessor

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in range(3)]
    (tmp_path / "img").mkdir()
    for name, image in zip("abc", images, strict=True):
        image.save(tmp_path / "img" / f"{name}.png")
    r = cli_json("track", *_vit_folders(vit_run), "--images", str(tmp_path / "img"), "--layers", "1")
    assert r["track"]["steps"] == list(VIT_STEPS) and r["inputs"]["kind"] == "images"
    for step, point in zip(VIT_STEPS, r["track"]["checkpoints"], strict=True):
        assert point["step_from"] == "folder name" and Path(point["path"]).name == f"ckpt-{step}"
        folder = Path(point["path"])
        pixels = ViTImageProcessor.from_pretrained(folder)(images=images, return_tensors="pt").pixel_values
        x, x1 = _vit_kappas(folder, pixels)
        np.testing.assert_allclose(point["report"]["embedding"]["kappa"]["per_sample"], x, rtol=1e-9)
        (layer,) = point["report"]["layers"]
        assert layer["index"] == 1
        np.testing.assert_allclose(layer["kappa"]["per_sample"], x1, rtol=1e-5)


def test_vit_checkpoints_on_synthetic_images_see_the_same_pixels(
    vit_run: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    """Without --images: the seeded synthetic images, the same for every checkpoint (the pixels are drawn
    once here, from condcli's input stream of the first checkpoint, and fed to each checkpoint's model)."""
    from condcli.inputs.batches import InputSpec, stream
    from condcli.loading.sources import load

    r = cli_json("track", *_vit_folders(vit_run), "--max-samples", "3", "--seed", "7", "--layers", "1")
    assert r["track"]["steps"] == list(VIT_STEPS) and r["inputs"]["kind"] == "synthetic"
    pre = load(str(vit_run / "ckpt-2")).preprocessing
    spec = InputSpec(max_samples=3, batch_size=8, seed=7)
    pixels = torch.cat([b.inputs["pixel_values"] for b in stream(pre, spec)])
    kappas = []
    for point in r["track"]["checkpoints"]:
        x, x1 = _vit_kappas(Path(point["path"]), pixels)
        np.testing.assert_allclose(point["report"]["embedding"]["kappa"]["per_sample"], x, rtol=1e-9)
        np.testing.assert_allclose(point["report"]["layers"][0]["kappa"]["per_sample"], x1, rtol=1e-5)
        kappas.append(x)
    assert not np.allclose(kappas[0], kappas[-1], rtol=1e-6)  # training moved the weights
