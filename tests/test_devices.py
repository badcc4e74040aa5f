"""``device`` resolution (issue 18 item 2): ``auto`` picks the first CUDA GPU when there is one, else the CPU;
``cuda`` where there is none, a GPU index past the last, or an unknown name are one UsageError line, exit 2.
CUDA's presence is simulated (torch.cuda.is_available / device_count), so this holds on any machine."""

from __future__ import annotations

import pytest
import torch

from condcli.cli.main import main
from condcli.errors import UsageError
from condcli.loading.devices import resolve_device


def _gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_auto_picks_the_first_gpu_when_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpus(monkeypatch, 2)
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device(" CUDA ") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(UsageError, match=r"has 2 CUDA device\(s\) \(cuda:0…cuda:1\)"):
        resolve_device("cuda:2")


def test_auto_is_the_cpu_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpus(monkeypatch, 0)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(UsageError, match="CUDA is not available on this machine") as e:
        resolve_device("cuda")
    assert e.value.exit_code == 2
    with pytest.raises(UsageError, match="unknown device 'tpu'"):
        resolve_device("tpu")


@pytest.mark.parametrize("command", ["spectrum", "sweep-lambda", "rank-decay", "check"])
def test_cuda_without_a_gpu_is_one_line_exit_2(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _gpus(monkeypatch, 0)
    extra = ["--max-kappa", "1e9"] if command == "check" else []
    assert main([command, "--device", "cuda", "--max-samples", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --device cuda: CUDA is not available on this machine")
    assert err.count("\n") == 1 and "Traceback" not in err
