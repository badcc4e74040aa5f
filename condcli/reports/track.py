"""What ``condcli track`` found, as dataclasses, and its JSON (docs/math.md#json, version 1).

One object: the envelope, ``model`` (the first checkpoint's, its ``spec`` the folders as given, plus
``checkpoints``: how many), ``inputs`` and ``settings`` (the first checkpoint's; every checkpoint read the
same inputs), ``track`` and ``notes``::

    track: {
      steps: [s_0, s_1, …],                     # ascending training steps, one per checkpoint
      checkpoints: [{step, path, step_from,      # step_from: "trainer_state.json" | "folder name"
                     report: {model, inputs, settings, embedding, layers, conditioned_forward, notes}}]
    }

Each checkpoint's ``report`` holds the keys of a ``spectrum`` report (without the envelope), so every number
a table, plot or page of ``track`` shows is in it: κ(X) is ``report.embedding.kappa``, per layer
``report.layers[i].kappa`` (κ(X_l)), ``.mu_la`` (μ(LA)) and ``.attention_entropy`` (H(P)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condcli.reports.envelope import envelope
from condcli.reports.spectrum import SpectrumReport
from condcli.reports.views import ReportViews


@dataclass(frozen=True)
class TrackPoint:
    """One checkpoint: its training step, folder and analysis."""

    step: int
    path: str
    step_from: str  # "trainer_state.json" | "folder name"
    report: SpectrumReport

    def to_json(self) -> dict[str, Any]:
        analysis = self.report.to_json()
        for key in envelope("spectrum"):
            analysis.pop(key, None)
        return {"step": self.step, "path": self.path, "step_from": self.step_from, "report": analysis}


@dataclass(frozen=True)
class TrackReport(ReportViews):
    """What ``condcli track`` found: the checkpoints' analyses in step order (at least one)."""

    given: tuple[str, ...]  # the folders as the user named them
    points: tuple[TrackPoint, ...]

    @property
    def first(self) -> SpectrumReport:
        return self.points[0].report

    @property
    def steps(self) -> list[int]:
        return [p.step for p in self.points]

    @property
    def notes(self) -> list[str]:
        """Every checkpoint's notes, each once."""
        return list(dict.fromkeys(note for p in self.points for note in p.report.notes))

    def to_json(self) -> dict[str, Any]:
        first = self.first
        model = first.model.to_json()
        model.update(spec=" ".join(self.given), checkpoints=len(self.points))
        return {
            **envelope("track"),
            "model": model,
            "inputs": first.inputs.to_json(),
            "settings": first.settings.to_json(),
            "track": {"steps": self.steps, "checkpoints": [p.to_json() for p in self.points]},
            "notes": self.notes,
        }
