"""--out's clean-up runs whole whenever SIGTERM or Ctrl-C lands (condcli/writing/folder.py
``cleaned_despite_signals``): the console script's handler raises where the program is, and a signal that
lands in the few instructions before the clean-up holds signals back used to skip it and leave the hidden
staging folder in --out (seen under load in tests/test_process_signals.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from condcli.errors import Stopped
from condcli.writing import folder


def test_a_signal_before_signals_are_held_still_cleans_then_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    entered: list[int] = []

    @contextmanager
    def landed_first() -> Iterator[None]:
        entered.append(1)
        if len(entered) == 1:  # the signal arrives before the mask is set
            raise Stopped(15)
        yield

    monkeypatch.setattr(folder, "signals_deferred", landed_first)
    cleaned: list[int] = []
    with pytest.raises(Stopped):
        folder.cleaned_despite_signals(lambda: cleaned.append(1))
    assert cleaned == [1] and len(entered) == 2


def test_a_signal_held_back_during_the_clean_up_is_raised_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextmanager
    def delivered_on_leaving() -> Iterator[None]:
        yield
        raise KeyboardInterrupt  # the held signal, delivered once the mask is lifted

    monkeypatch.setattr(folder, "signals_deferred", delivered_on_leaving)
    cleaned: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        folder.cleaned_despite_signals(lambda: cleaned.append(1))
    assert cleaned == [1]


def test_no_signal_cleans_once() -> None:
    cleaned: list[int] = []
    folder.cleaned_despite_signals(lambda: cleaned.append(1))
    assert cleaned == [1]
