"""The one-call Python API (condcli.api): the same report as the CLI byte for byte, a module in memory, typed
errors that name parameters, and the lazy export from ``import condcli``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

import condcli
from condcli.errors import CondcliError, UsageError

FAST = ("--max-samples", "2", "--batch-size", "2")
FAST_KW: dict[str, Any] = {"max_samples": 2, "batch_size": 2}


def _cli_text(cli: Callable[..., Result], *args: str) -> str:
    result = cli(*args, "--json")
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def _text(report: Any) -> str:
    return json.dumps(report.to_json(), indent=2) + "\n"


def test_import_condcli_loads_no_torch() -> None:
    code = "import sys, condcli; assert 'torch' not in sys.modules, 'torch'; print(condcli.__version__)"
    assert subprocess.run([sys.executable, "-c", code], check=True, capture_output=True).returncode == 0
    assert {"spectrum", "check", "compare", "sweep_lambda", "rank_decay"} <= set(dir(condcli))
    with pytest.raises(AttributeError):
        _ = condcli.no_such_thing  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "call"),
    [
        (("spectrum", "vit-plain", "--heads"), lambda: condcli.spectrum("vit-plain", heads=True, **FAST_KW)),
        (
            ("sweep-lambda", "vit-plain", "--lambdas", "1,5,10", "--layers", "0"),
            lambda: condcli.sweep_lambda("vit-plain", lambdas=[1, 5, 10], layers=[0], **FAST_KW),
        ),
        (
            ("rank-decay", "vit-plain", "--layers", "0,-1", "--conditioned", "10"),
            lambda: condcli.rank_decay("vit-plain", layers=[0, -1], conditioned=10, **FAST_KW),
        ),
        (
            ("check", "vit-plain", "--max-kappa", "1000", "--max-mu-la", "1e30"),
            lambda: condcli.check("vit-plain", rules={"max_kappa": 1000, "max_mu_la": 1e30}, **FAST_KW),
        ),
        (
            ("compare", "vit-plain", "vit-conditioned", "--layers", "0"),
            lambda: condcli.compare("vit-plain", "vit-conditioned", layers="0", **FAST_KW),
        ),
    ],
    ids=["spectrum", "sweep-lambda", "rank-decay", "check", "compare"],
)
def test_every_command_gives_the_cli_json_byte_for_byte(
    cli: Callable[..., Result], args: tuple[str, ...], call: Callable[[], Any]
) -> None:
    assert _text(call()) == _cli_text(cli, *args, *FAST)


def test_a_saved_report_is_checked_as_the_library_checks_its_json(tmp_path: Path) -> None:
    from condcli import gate

    report = condcli.spectrum("vit-plain", layers="none", conditioned=False, **FAST_KW)
    saved = report.save(tmp_path / "out")
    assert [p.name for p in saved] == ["report.json", "report.html", "spectrum.png"]
    on_disk = tmp_path / "out" / "report.json"
    assert json.loads(on_disk.read_text()) == report.to_dict()
    by_api = condcli.check(report, rules={"max_kappa": 1e6})
    assert _text(by_api) == _text(gate.check(json.loads(on_disk.read_text()), limits={"max_kappa": 1e6}))
    assert (
        by_api.passed and condcli.check(str(on_disk), rules={"max_kappa": 1e6}).to_json() == by_api.to_json()
    )


def _tiny_bert(tokenizer: Any) -> Any:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return BertModel(config).eval()


TEXTS = ["Return the sum of two numbers.", "Open a file and read its lines.", "Sort a list in place."]


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    """A random-init BERT built from a config, with the bert-docstrings sample's tokenizer, in memory and
    saved (the CLI's folder)."""
    from transformers import AutoTokenizer

    from condcli.loading.samples import samples_dir

    tokenizer = AutoTokenizer.from_pretrained(samples_dir() / "bert-docstrings")
    model = _tiny_bert(tokenizer)
    folder = tmp_path_factory.mktemp("bert")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer, folder


# what names the model and its inputs (a module in memory vs a folder; a list vs a file), not a number
IDENTITY = {
    ("model", "spec"),
    ("model", "from"),
    ("model", "source"),
    ("model", "weights_label"),  # "weights from FOLDER" against "weights in memory"
    ("inputs", "description"),
}


def _without_identity(report: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(report))
    for section, key in IDENTITY:
        out[section].pop(key)
    out["inputs"]["preprocessing"] = out["inputs"]["preprocessing"].split(" from ")[0]
    out.pop("notes")
    return out


def test_a_transformers_model_in_memory_gives_the_cli_numbers(
    cli: Callable[..., Result], bert: tuple[Any, Any, Path], tmp_path: Path
) -> None:
    model, tokenizer, folder = bert
    text = tmp_path / "texts.txt"
    text.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    live = condcli.spectrum(model, TEXTS, tokenizer=tokenizer, heads=True)
    cli_report = json.loads(_cli_text(cli, "spectrum", str(folder), "--text", str(text), "--heads"))
    got = live.to_json()
    assert got["model"]["spec"] == "BertModel (in memory)" and got["model"]["from"] == "in memory"
    assert got["inputs"]["description"] == "3 texts given as `inputs`"
    assert " from the `tokenizer` given (max 64 tokens" in got["inputs"]["preprocessing"]
    # every number, the settings and the layers' readings: the same JSON text
    assert json.dumps(_without_identity(got)) == json.dumps(_without_identity(cli_report))
    # the tokenizer given is read, not changed
    assert tokenizer.padding_side == "right" or tokenizer.padding_side == "left"


def test_ready_token_ids_and_a_dataloader_give_the_same_numbers(bert: tuple[Any, Any, Path]) -> None:
    import torch

    model, tokenizer, _ = bert
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    one = condcli.spectrum(model, batch, layers="none", conditioned=False)
    loader = torch.utils.data.DataLoader(
        [{k: v[i] for k, v in batch.items()} for i in range(len(TEXTS))], batch_size=2
    )
    many = condcli.spectrum(model, loader, layers="none", conditioned=False)
    texts = condcli.spectrum(model, TEXTS, tokenizer=tokenizer, layers="none", conditioned=False)
    assert one.to_json()["embedding"] == many.to_json()["embedding"] == texts.to_json()["embedding"]
    assert one.to_json()["inputs"]["kind"] == "text" and one.to_json()["inputs"]["count"] == 3


def test_errors_are_typed_and_name_parameters_not_flags() -> None:
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: condcli.spectrum("vit-plain", layers="first"), "`layers='first'`"),
        (lambda: condcli.spectrum("vit-plain", lam=-1.0, max_samples=1), "lam"),
        (lambda: condcli.sweep_lambda("vit-plain", lambdas=[1], steps=3), "`steps`"),
        (lambda: condcli.rank_decay("vit-plain", layers="none"), "`layers=none`"),
        (lambda: condcli.check("vit-plain"), "`baseline=FILE`"),
        (lambda: condcli.spectrum("vit-plain", no_such_option=1), "`no_such_option`"),
    ]
    for call, named in cases:
        with pytest.raises(CondcliError) as caught:
            call()
        assert named in caught.value.message + (caught.value.hint or "")
        assert "--" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_module_with_a_tokenizer_needs_a_transformers_model() -> None:
    from torch import nn

    with pytest.raises(UsageError, match="tokenizer"):
        condcli.spectrum(nn.Linear(2, 2), tokenizer=object())
