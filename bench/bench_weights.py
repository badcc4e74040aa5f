"""`make bench`: ``condcli weights`` on a random-init Llama of about 1B parameters saved as safetensors (bf16,
Llama-3.2-1B's shape: d 2,048, 16 layers, 32 query / 8 KV heads, MLP 8,192, vocab 128,256, tied head), against
a plain ``from_pretrained`` load of the same folder (issue 31: it reads tensor by tensor, so the model never
sits in memory whole).

The folder is built in a temporary directory (random normal weights written straight to model.safetensors,
config.json beside it) and removed after. Each contender runs in a fresh child process: (a) ``condcli
weights`` as a library call (every number: κ(E) and its spectrum, every layer's κ(W_Q/W_K/W_V/W_O) whole and
per head); (b) ``LlamaForCausalLM.from_pretrained`` alone (no number computed), as loaded by default and
(c) with ``dtype=torch.bfloat16``. Peak RSS (the child's VmHWM; beside it its RSS after importing torch and
transformers) and wall time; the ratios are (a) over (b) and (c).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from bench.bench_long_sequence import _status_kib
from bench.bench_spectrum import machine, ratio

CHILD_TAG = "BENCH_WEIGHTS_CHILD "
SHAPE = {
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128_256,
    "tie_word_embeddings": True,
    "max_position_embeddings": 2048,
}
TINY = {**SHAPE, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 1000}
TINY |= {"num_attention_heads": 4, "num_key_value_heads": 2}
LABELS = {
    "weights": "(a) condcli weights (streamed, every number)",
    "load": "(b) from_pretrained (default dtype)",
    "load_bf16": "(c) from_pretrained(dtype=bfloat16)",
}


def build(folder: Path, shape: Mapping[str, object]) -> int:
    """A random Llama of ``shape`` saved as bf16 safetensors (norms 1, other weights N(0, 0.02²)); its
    parameter count."""
    from accelerate import init_empty_weights
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**shape, dtype="bfloat16")
    with init_empty_weights():
        meta = LlamaForCausalLM(config)
    meta.tie_weights()  # init_empty_weights leaves the tied head its own tensor: saved once, as it should be
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for name, p in meta.named_parameters():  # a tied head once, as save_pretrained writes it
        if p.ndim == 1:
            tensors[name] = torch.ones(p.shape, dtype=torch.bfloat16)
        else:
            tensors[name] = (torch.randn(p.shape, generator=gen) * 0.02).to(torch.bfloat16)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(folder)
    return sum(t.numel() for t in tensors.values())


def child(what: str, folder: Path) -> dict[str, float]:
    import transformers

    from condcli.analysis.runs import RunOptions
    from condcli.analysis.weights import analyse_weights

    base = _status_kib("VmRSS:") / 1024
    t0 = time.perf_counter()
    if what == "weights":
        report = analyse_weights(RunOptions(model=str(folder)))
        assert report.streamed and len(report.layers) > 0
    else:
        kwargs = {"dtype": torch.bfloat16} if what == "load_bf16" else {}
        model = transformers.LlamaForCausalLM.from_pretrained(folder, **kwargs)
        assert next(model.parameters()).device.type == "cpu"
    seconds = time.perf_counter() - t0
    # VmHWM: this process's own high-water mark (ru_maxrss keeps the forking parent's across exec)
    peak = _status_kib("VmHWM:") / 1024
    return {"seconds": seconds, "rss_peak": peak, "rss_before": base}


def run_child(what: str, folder: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "bench.bench_weights", "--child", what, str(folder)]
    done = subprocess.run(
        cmd, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, check=False
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(CHILD_TAG)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"weights child ({what}) failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(lines[-1].removeprefix(CHILD_TAG))
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a 2-layer toy of the same family (smoke test)")
    parser.add_argument("--child", nargs=2, metavar=("WHAT", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(CHILD_TAG + json.dumps(child(args.child[0], Path(args.child[1]))), flush=True)
        return {}
    tmp = Path(tempfile.mkdtemp(prefix="condcli-bench-weights-"))
    try:
        t0 = time.perf_counter()
        params = build(tmp / "llama", TINY if args.tiny else SHAPE)
        size = (tmp / "llama" / "model.safetensors").stat().st_size / 2**20
        print(
            f"condcli weights: random Llama, {params / 1e6:,.1f}M parameters, bf16 safetensors"
            f" {size:,.0f} MiB"
        )
        print(f"(built in {time.perf_counter() - t0:.0f} s); {machine()}")
        got = {what: run_child(what, tmp / "llama") for what in LABELS}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    header = f"{'contender':<46} {'seconds':>8} {'peak RSS MiB':>13} {'after imports MiB':>18}"
    print(header)
    print("-" * len(header))
    for what, label in LABELS.items():
        g = got[what]
        print(f"{label:<46} {g['seconds']:>8.1f} {g['rss_peak']:>13,.0f} {g['rss_before']:>18,.0f}")
    a = got["weights"]
    for base in ("load", "load_bf16"):
        b = got[base]
        rss = ratio(a["rss_peak"], b["rss_peak"])
        above = ratio(a["rss_peak"] - a["rss_before"], b["rss_peak"] - b["rss_before"])
        print(
            f"(a) vs {LABELS[base][:3]}: peak RSS {rss:.2f}x (above the imports {above:.2f}x), "
            f"time {ratio(a['seconds'], b['seconds']):.2f}x"
        )
    return got


if __name__ == "__main__":
    main()
