"""`bench_long_sequence --mix --whole-process`: issue 43's workload timed the way the issue measured it, each
contender a whole process (interpreter start, imports, loading the checkpoint, tokenizing, the work).

The tempered random-init Llama of bench/long_mix.py is saved as a checkpoint folder (safetensors, and a
word-level tokenizer whose token ``t<i>`` is id i), and the prompt of :func:`bench.long_mix.mixed_prompt` is
written as one line of those words, so each process reads the same model and the same token ids:

  (a) ``python -c`` that loads the folder with transformers (sdpa) and runs the forward;
  (f) the same with eager attention, returning every attention;
  (e) ``condcli spectrum FOLDER --text prompt.txt --no-conditioned --json``, every layer;
  (o) (a) ended the way condcli ends (:func:`condcli.cli.main.finish`: exit handlers, then ``os._exit``,
      without the interpreter's teardown of every module): the part of (e) ÷ (a) that is only how the
      process ends, shown beside it (the verdicts stay against (a), as the issue measured).

What a user waits for is the whole process, so the issue's own table (463 and 1,858 tokens) compared
these. The in-process table of bench/long_mix.py leaves the shared costs out and is the stricter one.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import long_mix
from bench.bench_spectrum import Verdict, ratio

FORWARD = """
import sys, torch
from transformers import AutoModel, AutoTokenizer
folder, text, attn = sys.argv[1:4]
torch.set_grad_enabled(False)
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModel.from_pretrained(folder, attn_implementation=attn).eval()
ids = tok(open(text, encoding="utf-8").read().strip(), return_tensors="pt")
out = model(**ids, output_attentions=attn == "eager")
if attn == "eager":
    assert len(out.attentions) == model.config.num_hidden_layers
if sys.argv[4:] == ["end-as-condcli"]:
    from condcli.cli.main import finish
    finish(0)
"""

LABELS = {
    "a": "(a) process: load + forward (sdpa)",
    "f": "(f) process: load + eager forward, every attention",
    "e": "(e) process: condcli spectrum --no-conditioned",
    "o": "(a) ended as condcli ends (no interpreter teardown)",
}


def save_checkpoint(shape: Any, folder: Path) -> Path:
    """The tempered Llama of bench/long_mix.py as a checkpoint folder with a word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    built = folder / "built"
    built.mkdir()
    loaded, _ = long_mix.mixed_model(shape, built, tempered=True)
    model = folder / "model"
    net: Any = loaded.model  # a transformers PreTrainedModel
    net.save_pretrained(model)
    vocab = {f"t{i}": i for i in range(shape.vocab)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="t0")
    fast.model_max_length = int(net.config.max_position_embeddings)
    fast.save_pretrained(model)
    return model


def write_prompt(shape: Any, tokens: int, into: Path) -> Path:
    """The ids of :func:`bench.long_mix.mixed_prompt` at ``tokens`` as one line of words."""
    ids = long_mix.random_ids(shape.vocab, tokens)
    path = into / f"prompt{tokens}.txt"
    path.write_text(" ".join(f"t{i}" for i in ids) + "\n", encoding="utf-8")
    return path


def commands(model: Path, text: Path) -> dict[str, list[str]]:
    """Label key → command line of each contender."""
    cli = Path(sys.executable).parent / "condcli"
    condcli = [str(cli)] if cli.exists() else [sys.executable, "-m", "condcli"]
    return {
        "a": [sys.executable, "-c", FORWARD, str(model), str(text), "sdpa"],
        "f": [sys.executable, "-c", FORWARD, str(model), str(text), "eager"],
        "e": [*condcli, "spectrum", str(model), "--text", str(text), "--no-conditioned", "--json"],
        "o": [sys.executable, "-c", FORWARD, str(model), str(text), "sdpa", "end-as-condcli"],
    }


def run_once(command: list[str], cwd: Path) -> tuple[float, str]:
    """Wall seconds of one whole process and its standard output (it must succeed)."""
    env = {**os.environ, "COLUMNS": "100"}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} … exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return took, done.stdout


def side_by_side(shape: Any, lengths: list[int], repeats: int, work: Path) -> list[Verdict]:
    """Save the checkpoint, then time each contender ``repeats`` times, interleaved, at each length."""
    model = save_checkpoint(shape, work)
    print(f"\n=== whole processes on the saved tempered Llama ({model}) ===")
    header = f"{'tokens':>6}  {'contender':<52} {'median s':>9} {'vs (a)':>8} {'vs (f)':>8}"
    print(header + "\n" + "-" * len(header))
    verdicts: list[Verdict] = []
    for tokens in lengths:
        text = write_prompt(shape, tokens, work)
        cmds = commands(model, text)
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(repeats):
            for key, command in cmds.items():
                took, out = run_once(command, work)
                times[key].append(took)
                if key == "e":
                    analysed = json.loads(out)["inputs"]["tokens"]
                    if analysed != tokens:  # the bench must time the prompt it names
                        raise RuntimeError(f"condcli analysed {analysed} tokens, not {tokens}")
        t = {k: statistics.median(v) for k, v in times.items()}
        for key, label in LABELS.items():
            print(
                f"{tokens:>6}  {label:<52} {t[key]:>9.2f} {t[key] / t['a']:>7.2f}x {t[key] / t['f']:>7.2f}x"
            )
        print(f"{tokens:>6}  (e) ÷ (o), both ending without the teardown: {t['e'] / t['o']:.2f}x")
        if tokens >= 2048:
            verdicts.append(
                Verdict(f"{tokens} tokens, whole processes: (e) / (f)", ratio(t["e"], t["f"]), 3.0)
            )
        if tokens <= 512:
            verdicts.append(
                Verdict(f"{tokens} tokens, whole processes: (e) / (a)", ratio(t["e"], t["a"]), 1.5)
            )
    return verdicts
