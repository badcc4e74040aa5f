"""The Python API raises condcli's error types naming the parameter, for every wrong type or value a caller
can pass (issue 38, item 5): before, each of these ended in a raw RuntimeError, KeyError, ValueError,
IndexError, TypeError or AttributeError from deep inside torch, transformers or condcli."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import condcli
from condcli.errors import CondcliError, ParameterTypeError, UsageError
from tests.hostile_inputs_setup import VOCAB, tiny_bert

FAST: dict[str, Any] = {"max_samples": 2, "batch_size": 2}


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """A random-init BERT (one layer) in memory and its WordPiece tokenizer."""
    from transformers import AutoTokenizer, BertModel

    folder = tiny_bert(tmp_path_factory.mktemp("bert"))
    return BertModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


class Unsaveable:
    """A tokenizer-like object whose save_pretrained raises."""

    def save_pretrained(self, folder: str) -> None:
        raise OSError(28, "No space left on device")


def _loader(key: str) -> Any:
    rows = [{key: torch.tensor([2, 5, 3])} for _ in range(4)]
    return torch.utils.data.DataLoader(rows, batch_size=2)


# (id, the call, the parameter its error must name, what the error line says)
CASES: list[tuple[str, Callable[[Any, Any], object], str, str]] = [
    ("empty-text", lambda m, t: condcli.spectrum(m, ["hello", ""], tokenizer=t), "inputs", "empty string"),
    ("blank-text", lambda m, t: condcli.spectrum(m, ["  "], tokenizer=t), "inputs", "empty string"),
    ("no-inputs", lambda m, t: condcli.spectrum(m, []), "inputs", "is empty"),
    ("loader-wrong-key", lambda m, t: condcli.spectrum(m, _loader("ids")), "inputs", "'ids'"),
    (
        "ids-past-vocabulary",
        lambda m, t: condcli.spectrum(m, torch.tensor([[2, len(VOCAB) + 7, 3]])),
        "inputs",
        f"token id {len(VOCAB) + 7} is outside the vocabulary",
    ),
    ("negative-id", lambda m, t: condcli.spectrum(m, torch.tensor([[2, -1, 3]])), "inputs", "token id -1"),
    ("ids-rank-1", lambda m, t: condcli.spectrum(m, torch.tensor([2, 5, 3])), "inputs", "of shape [3]"),
    (
        "ids-rank-3",
        lambda m, t: condcli.spectrum(m, torch.ones(1, 1, 3, dtype=torch.long)),
        "inputs",
        "[1, 1, 3]",
    ),
    (
        "pixels-rank-3",
        lambda m, t: condcli.spectrum("vit-plain", torch.zeros(3, 32, 32)),
        "inputs",
        "pixels of shape [3, 32, 32]",
    ),
    (
        "tokenizer-cannot-save",
        lambda m, t: condcli.spectrum(m, ["hello"], tokenizer=Unsaveable()),
        "tokenizer",
        "No space left on device",
    ),
    ("layers-float", lambda m, t: condcli.spectrum("vit-plain", layers=3.5, **FAST), "layers", "layers=3.5"),
    ("layers-list-of-floats", lambda m, t: condcli.spectrum("vit-plain", layers=[0.5]), "layers", "[0.5]"),
    ("layers-bool", lambda m, t: condcli.spectrum("vit-plain", layers=True), "layers", "layers=True"),
    (
        "device-int",
        lambda m, t: condcli.spectrum("vit-plain", device=5, **FAST),
        "device",
        "device=5 is an int",
    ),
    ("max-samples-str", lambda m, t: condcli.spectrum("vit-plain", max_samples="2"), "max_samples", "a str"),
    ("batch-size-float", lambda m, t: condcli.spectrum("vit-plain", batch_size=2.5), "batch_size", "a float"),
    ("seed-str", lambda m, t: condcli.spectrum("vit-plain", seed="0"), "seed", "seed='0'"),
    ("lam-str", lambda m, t: condcli.spectrum("vit-plain", lam="10"), "lam", "not a number"),
    ("dtype-int", lambda m, t: condcli.spectrum("vit-plain", dtype=32), "dtype", "dtype=32"),
    ("model-int", lambda m, t: condcli.weights(5), "model", "model is an int"),
    ("check-int", lambda m, t: condcli.check(5, rules={"max_kappa": 10}), "report_or_model", "is an int"),
    ("check-baseline-int", lambda m, t: condcli.check({}, baseline=3), "baseline", "is an int"),
    ("compare-float", lambda m, t: condcli.compare("vit-plain", 2.5), "b", "b is a float"),
    ("rank-index-str", lambda m, t: condcli.rank_decay("vit-plain", index="3"), "index", "index='3'"),
    (
        "rank-conditioned-str",
        lambda m, t: condcli.rank_decay("vit-plain", conditioned="x"),
        "conditioned",
        "'x'",
    ),
    (
        "sweep-lambdas-str",
        lambda m, t: condcli.sweep_lambda("vit-plain", lambdas="1,2"),
        "lambdas",
        "numbers",
    ),
    (
        "sweep-target-str",
        lambda m, t: condcli.sweep_lambda("vit-plain", target_kappa="2"),
        "target_kappa",
        "'2'",
    ),
    ("sweep-steps-float", lambda m, t: condcli.sweep_lambda("vit-plain", steps=2.5), "steps", "steps=2.5"),
]


@pytest.mark.parametrize(("call", "param", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_wrong_argument_is_a_condcli_error_naming_its_parameter(
    bert: tuple[Any, Any], call: Callable[[Any, Any], object], param: str, says: str
) -> None:
    with pytest.raises(CondcliError) as caught:
        call(*bert)
    error = caught.value
    assert param in error.params, str(error)  # marked, so that the CLI could show its flag instead
    assert says in str(error) and "\n" not in str(error)
    assert "--" not in str(error)  # a parameter, never a flag
    assert error.exit_code == 2


def test_a_wrong_type_is_also_a_type_error(bert: tuple[Any, Any]) -> None:
    for call in (
        lambda: condcli.spectrum("vit-plain", device=5),
        lambda: condcli.spectrum("vit-plain", layers=3.5),
        lambda: condcli.check(5),
        lambda: condcli.read_report(Path("tests/golden/spectrum-vit-plain.json")).save(7),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError) as caught:
            call()
        assert isinstance(caught.value, ParameterTypeError) and isinstance(caught.value, UsageError)


def test_save_into_a_file_names_its_parameter_not_the_flag(tmp_path: Path) -> None:
    report = condcli.read_report(Path(__file__).parent / "golden" / "spectrum-vit-plain.json")
    (tmp_path / "a_file").write_text("mine")
    for write in (report.save, report.write_csv):
        with pytest.raises(UsageError) as caught:
            write(tmp_path / "a_file")
        assert str(caught.value).startswith(f"folder={tmp_path / 'a_file'}: ") and "--out" not in str(
            caught.value
        )
        assert caught.value.params == ("folder",)
    assert (tmp_path / "a_file").read_text() == "mine"
    with pytest.raises(UsageError, match="fmt=gif"):
        report.save(tmp_path / "out", fmt="gif")
    assert not (tmp_path / "out").exists()


def test_good_arguments_of_other_types_still_work(bert: tuple[Any, Any], tmp_path: Path) -> None:
    """numpy integers as layers and indices, a Path as the folder: accepted as their Python twins."""
    import numpy as np

    model, tokenizer = bert
    one = condcli.spectrum(
        model, ["hello world"], tokenizer=tokenizer, layers=[np.int64(0)], conditioned=False
    )
    two = condcli.spectrum(model, ["hello world"], tokenizer=tokenizer, layers=0, conditioned=False)
    assert one.to_json()["layers"] == two.to_json()["layers"]
    assert [p.name for p in two.save(str(tmp_path / "out"))][:2] == ["report.json", "report.html"]
