"""`condcli track` agrees with training: the ConditioningCallback of an HF Trainer run (tiny random-init BERT
from a config, 6 steps, a checkpoint every 2) saves its probe batch beside the checkpoints, and `track` with
no input option analyses every checkpoint on it: the values equal, bit for bit, the ones the callback logged
at the same steps (the Trainer's own log_history). The probe file is checked against the Trainer's collator
run on the same samples by hand; `track`'s help lists no option it refuses."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result

from condcli.analysis.track import Checkpoint, TrackOptions, probe_of
from condcli.analysis.track_probe import PROBE_FILE, find_probe, read_probe
from condcli.errors import InputError
from condcli.inputs.batches import InputSpec
from tests.test_track import BERT_STEPS, LINES, bert_run  # noqa: F401  (the Trainer run, a fixture)

PER_LAYER = ("kappa", "mu_la", "attention_entropy")


def _logged(run: Path, step: int) -> dict[str, float]:
    history = json.loads((run.parent / "log_history.json").read_text())
    return next(e for e in history if e.get("step") == step and "condcli/kappa_x" in e)


def test_the_callback_saves_its_probe_batch_in_the_run_folder_and_each_checkpoint(bert_run: Path) -> None:  # noqa: F811
    """The file holds what the Trainer's collator makes of the first samples, less the label: the tensors
    the analysed BertModel reads."""
    from transformers import BertTokenizer, DataCollatorWithPadding

    tok = BertTokenizer(str(bert_run.parent / "vocab.txt"))
    want = DataCollatorWithPadding(tok)([tok(line) for line in LINES])
    saved = read_probe(bert_run / PROBE_FILE)
    assert sorted(saved) == sorted(want) == ["attention_mask", "input_ids", "token_type_ids"]
    for key, tensor in want.items():
        assert torch.equal(saved[key], tensor), key
    assert int(saved["attention_mask"].sum(1).min()) < saved["attention_mask"].shape[1]  # padded: a real test
    for step in BERT_STEPS:
        copy = read_probe(bert_run / f"checkpoint-{step}" / PROBE_FILE)
        assert all(torch.equal(copy[k], saved[k]) for k in saved)


def test_track_with_no_input_option_gives_the_callbacks_logged_values(
    bert_run: Path,  # noqa: F811
    cli_json: Callable[..., dict[str, Any]],
) -> None:
    r = cli_json("track", str(bert_run))
    assert r["track"]["steps"] == list(BERT_STEPS)
    assert r["inputs"]["count"] == len(LINES) and r["inputs"]["kind"] == "text"
    assert "probe batch" in r["inputs"]["description"] and PROBE_FILE in r["inputs"]["description"]
    seen = []
    for step, point in zip(BERT_STEPS, r["track"]["checkpoints"], strict=True):
        logged, report = _logged(bert_run, step), point["report"]
        assert report["embedding"]["kappa"]["median"] == logged["condcli/kappa_x"]
        assert [layer["index"] for layer in report["layers"]] == [0, 1]
        for layer in report["layers"]:
            for key in PER_LAYER:
                assert layer[key]["median"] == logged[f"condcli/layer_{layer['index']}/{key}"], (step, key)
        seen.append(logged["condcli/kappa_x"])
    assert len(set(seen)) == len(seen)  # the weights moved: three different values, not one three times


def test_checkpoints_named_alone_find_the_probe_and_a_copied_checkpoint_keeps_it(
    bert_run: Path,  # noqa: F811
    tmp_path: Path,
    cli_json: Callable[..., dict[str, Any]],
) -> None:
    copied = tmp_path / "elsewhere"
    shutil.copytree(bert_run / "checkpoint-4", copied)  # its own probe file came along; no run folder
    r = cli_json("track", str(copied), "--layers", "none")
    point = r["track"]["checkpoints"][0]
    assert point["report"]["embedding"]["kappa"]["median"] == _logged(bert_run, 4)["condcli/kappa_x"]
    # a checkpoint-* folder without its own file: its run folder's
    run = tmp_path / "run"
    shutil.copytree(bert_run / "checkpoint-2", run / "checkpoint-2")
    (run / "checkpoint-2" / PROBE_FILE).unlink()
    assert find_probe([run / "checkpoint-2"]) == ()
    shutil.copy(bert_run / PROBE_FILE, run / PROBE_FILE)
    assert find_probe([run / "checkpoint-2"]) == (run / PROBE_FILE,)


def test_text_or_images_given_wins_over_the_probe(bert_run: Path) -> None:  # noqa: F811
    checkpoints = [Checkpoint(bert_run / "checkpoint-2", 2, "trainer_state.json")]
    assert probe_of(checkpoints, InputSpec(), TrackOptions()) == bert_run / "checkpoint-2" / PROBE_FILE
    assert probe_of(checkpoints, InputSpec(text=Path("x.txt")), TrackOptions()) is None
    assert probe_of(checkpoints, InputSpec(), TrackOptions(probe=False)) is None


def test_probe_split_by_batch_size_and_cut_by_max_samples(
    bert_run: Path,  # noqa: F811
    cli_json: Callable[..., dict[str, Any]],
) -> None:
    """--batch-size splits the probe (each sample still cut to its own tokens: the same values up to the
    float32 kernels' rounding); --max-samples takes its first samples."""
    whole = cli_json("track", str(bert_run / "checkpoint-6"), "--layers", "1")
    split = cli_json("track", str(bert_run / "checkpoint-6"), "--layers", "1", "--batch-size", "1")
    first = cli_json("track", str(bert_run / "checkpoint-6"), "--layers", "1", "--max-samples", "2")
    a, b, c = (r["track"]["checkpoints"][0]["report"] for r in (whole, split, first))
    np.testing.assert_allclose(
        b["embedding"]["kappa"]["per_sample"], a["embedding"]["kappa"]["per_sample"], rtol=1e-5
    )
    np.testing.assert_allclose(
        b["layers"][0]["kappa"]["per_sample"], a["layers"][0]["kappa"]["per_sample"], rtol=1e-4
    )
    assert c["inputs"]["count"] == 2
    np.testing.assert_allclose(
        c["embedding"]["kappa"]["per_sample"], a["embedding"]["kappa"]["per_sample"][:2], rtol=1e-5
    )


def test_probes_that_differ_are_one_error(bert_run: Path, tmp_path: Path) -> None:  # noqa: F811
    from safetensors.torch import load_file, save_file

    for step in (2, 4):
        shutil.copytree(bert_run / f"checkpoint-{step}", tmp_path / f"checkpoint-{step}")
    other = tmp_path / "checkpoint-4" / PROBE_FILE
    tensors = load_file(str(other))
    tensors["input_ids"][0, 1] += 1
    save_file(
        tensors, str(other), metadata={"format": "condcli probe batch", "version": "1", "main": "input_ids"}
    )
    with pytest.raises(InputError, match="hold different probe batches"):
        find_probe([tmp_path / "checkpoint-2", tmp_path / "checkpoint-4"])
    (tmp_path / "checkpoint-4" / PROBE_FILE).write_bytes(b"not safetensors")
    with pytest.raises(InputError, match="cannot be read as a probe batch"):
        find_probe([tmp_path / "checkpoint-2", tmp_path / "checkpoint-4"])


def test_track_help_lists_no_option_it_refuses(cli: Callable[..., Result]) -> None:
    import re

    result = cli("track", "--help")
    assert result.exit_code == 0
    flags = set(re.findall(r"(--[a-z][a-z-]+)", result.output))
    assert not flags & {"--checkpoint", "--model-arg", "--weights"}
    assert {"--text", "--images", "--max-samples", "--batch-size", "--seed", "--layers"} <= flags
    for flag, value in (("--weights", "random"), ("--checkpoint", "w.safetensors"), ("--model-arg", "a=1")):
        refused = cli("track", "somewhere", flag, value)  # hidden, and still refused with the reason
        assert refused.exit_code == 2 and f"{flag} does not apply to track" in refused.stderr
