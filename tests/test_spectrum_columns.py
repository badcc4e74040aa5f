"""The per-layer table fits the terminal: the registry's default columns fit 100 columns, a narrower
terminal drops the least important ones (never a digit), `columns` picks registry keys (with a "did you
mean"), `wide` shows everything, and the footnote says how μ is formed from what is printed."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.cli.spectrum_table import available_columns, layer_table, mu_note, render
from condcli.errors import UsageError
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from condcli.reports.metrics import FORWARD
from condcli.reports.spectrum import SpectrumReport


@pytest.fixture(scope="module")
def report() -> SpectrumReport:
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    inputs = stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))
    return analyse_spectrum(loaded, inputs, SpectrumOptions(lam=10.0), "test")


def _printed(report: SpectrumReport, width: int, **kw: object) -> str:
    out = Console(width=width, record=True, file=open("/dev/null", "w"))
    render(out, report, **kw)  # type: ignore[arg-type]
    return out.export_text()


def _layer_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("layers ("))
    return [line for line in lines[start + 1 :] if line[:1] in "┏┃┡│└"]


def test_the_default_fits_100_columns_with_the_registry_columns(report: SpectrumReport) -> None:
    _, shown = layer_table(report, width=100)
    assert [c.key for c in shown] == [
        c.key for c in available_columns(report) if c.rank is not None
    ]  # everything the registry marks compact fits
    assert {"kappa", "mu_la", "mu_a", "kappa_probs", "attention_entropy", "conditioned.mu_la"} <= {
        c.key for c in shown
    }
    lines = _layer_lines(_printed(report, 100))
    assert lines and max(len(line) for line in lines) <= 100
    assert not any("…" in line for line in lines)


@pytest.mark.parametrize("width", [80, 60, 40])
def test_a_narrow_terminal_drops_columns_never_digits(report: SpectrumReport, width: int) -> None:
    _, wide = layer_table(report, width=100)
    _, narrow = layer_table(report, width=width)
    dropped = [c for c in wide if c not in narrow]
    kept_ranks = [c.rank or 0 for c in narrow]
    assert dropped and all((c.rank or 0) > max(kept_ranks) for c in dropped)  # the least important go
    lines = _layer_lines(_printed(report, width))
    assert not any("…" in line for line in lines)
    assert narrow[0].key == "kappa"  # κ(X_l) is the last to go


def test_columns_and_wide(report: SpectrumReport) -> None:
    _, shown = layer_table(report, ["mu_la", "conditioned.kappa"], width=40)
    assert [c.key for c in shown] == ["mu_la", "conditioned.kappa"]  # asked for: never dropped
    _, every = layer_table(report, wide=True, width=40)
    assert {c.key for c in every} >= {m.key for m in FORWARD if m.column and not m.needs_mixing} - {
        "kappa_distinct"  # a ViT's rows are distinct: κ_distinct = κ, no column
    }
    with pytest.raises(UsageError, match="did you mean columns=mu_la"):
        layer_table(report, ["mu_lA"])
    with pytest.raises(UsageError, match="is not a column of this report"):
        layer_table(report, ["kappa_mixing"])  # a metric, but no layer of this ViT mixes with M ≠ P


def test_the_footnote_says_how_mu_is_formed_from_what_is_printed(report: SpectrumReport) -> None:
    _, default = layer_table(report, width=100)
    _, every = layer_table(report, wide=True)
    assert "κ(A_l) and the whole-projection κ(W): `wide`" in mu_note(default)
    assert "not the whole-projection κ(W) columns" in mu_note(every) and "`wide`" not in mu_note(every)
    assert "κ(W^h) are each head's d×d_h slices" in " ".join(_printed(report, 100).split())


def test_the_cli_checks_columns_before_any_work(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import condcli.analysis.runs as runs

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before `columns` was checked")

    monkeypatch.setattr(runs, "setup_run", never)
    bad = cli("spectrum", "vit-plain", "--columns", "kappa,mu_lA")
    assert bad.exit_code == 2
    assert (
        bad.stderr.strip() == "error: --columns: 'mu_lA' is not a metric key — did you mean --columns mu_la?"
    )
    both = cli("spectrum", "vit-plain", "--columns", "kappa", "--wide")
    assert both.exit_code == 2 and "--columns and --wide both choose the columns" in both.stderr


def test_the_cli_prints_the_columns_asked_for(cli: Any) -> None:
    result = cli("spectrum", "vit-plain", "--max-samples", "2", "--columns", "kappa,conditioned.mu_la")
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("┃ layer"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["layer", "κ(X_l)", "μ(LA) +10I"]
