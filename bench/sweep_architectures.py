"""Breadth sweep (issue 42): every transformers model type that builds offline with a tiny random config, and
~100 timm models across families with ``--weights random``, each run through
``condcli spectrum --max-samples 2 --layers 0,-1 --json`` as a user would (the HF model saved by
``save_pretrained`` into a temporary folder and loaded from there), each classified:

- ``verified``: every analysed layer's Q/K/V reading is a family's, a declared one, or proven on the first
  batch;
- ``unverified``: an analysed layer's generic reading is unproven;
- ``refused``: the run said why it yields no layer number, with the refusal code
  (no-attention | linear-attention | qkv-unreadable | p-unobservable | inputs; ``uncoded`` where the run gave
  none), from ``layers_refused[i].reason.code`` or the one-line error's ``[code]``;
- ``crash``: exit 3 (an internal error); ``failed``: any other non-zero exit;
- ``timeout``: past ``--timeout`` seconds;
- ``not built``: the tiny config or its model cannot be built offline (counted apart, with the reason).

Each case runs in a forked child (the heavy imports paid once in the parent) through condcli's own CLI runner
(:func:`condcli.cli.main.main`), its stdout/stderr to files; ``--jobs`` children at a time. Output: a JSON of
every case and a markdown table (``--out-md``, default docs/breadth.md).

    nice -n 10 python bench/sweep_architectures.py --jobs 2 --out-json /tmp/breadth.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: bench.* from the checkout
from bench.tiny_configs import TIERS, build_hf, build_tier

SPECTRUM = ["spectrum", "--max-samples", "2", "--layers", "0,-1", "--json"]
CODES = ("no-attention", "linear-attention", "qkv-unreadable", "p-unobservable", "inputs")
ROUND_TRIP = re.compile(r"cannot load the config|in .*safetensors has shape|the model expects \[")
CODE_IN_LINE = re.compile(r"\[(" + "|".join(CODES) + r")\]")
# an inputs refusal raised in the model's own code after it took the inputs: a size the tiny config got wrong
OWN_FAILURE = re.compile(
    r"\[inputs\].*(after taking them|the model's own code failed|RuntimeError|IndexError)"
)


def child(kind: str, name: str, workdir: str, timeout: float, threads: int) -> None:
    """Build and run one case in this (forked) process on ``threads`` torch threads (its share of the cores:
    the CPUs over ``--jobs``); write result.json into ``workdir``. An HF model whose own code fails on the
    inputs at one size of :data:`TIERS` is built and run again at the next (the tiny config's fault, not the
    model's); the earlier lines are kept as ``tries``."""
    import torch

    torch.set_num_threads(threads)
    out = Path(workdir)
    result: dict[str, Any] = {"kind": kind, "name": name}
    tier = 0
    while True:
        _redirect(out)
        try:
            if kind == "hf":
                folder = out / f"model{tier}"
                result["built_as"], tier = build_tier(name, folder, tier)
                argv = [*SPECTRUM[:1], str(folder), *SPECTRUM[1:]]
            else:
                argv = [*SPECTRUM[:1], name, "--weights", "random", *SPECTRUM[1:]]
        except BaseException as e:
            if "rc" in result:  # no bigger size builds: the last run stands, and is no earlier try
                _restore(out)
                result["tries"].pop()
                break
            result["built"] = False
            result["why"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            (out / "result.json").write_text(json.dumps(result))
            os._exit(0)
        result["built"] = True
        (out / "result.json").write_text(json.dumps(result))
        result["rc"] = _run(argv)
        (out / "result.json").write_text(json.dumps(result))
        said = _error_line((out / "stderr").read_text(errors="replace"))
        if kind != "hf" or result["rc"] != 2 or not OWN_FAILURE.search(said) or tier + 1 >= len(TIERS):
            break
        result.setdefault("tries", []).append(f"{result['built_as']}: {said}"[:400])
        for f in ("stdout", "stderr"):
            os.replace(out / f, out / f"{f}.{tier}")
        tier += 1
    (out / "result.json").write_text(json.dumps(result))
    os._exit(0)


def _redirect(out: Path) -> None:
    """This process's stdout and stderr to fresh files in ``out``: the file descriptors, and sys.stdout and
    sys.stderr on them (a parent that replaced those, as pytest's capture does, is not written to)."""
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, name in ((1, "stdout"), (2, "stderr")):
        opened = os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", closefd=False)  # the rest of this (forked) process
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def _restore(out: Path) -> None:
    """The last run's stdout and stderr back in place (a bigger size did not build)."""
    kept = sorted(out.glob("stderr.*"))
    if kept:
        tier = kept[-1].suffix
        for f in ("stdout", "stderr"):
            os.replace(out / f"{f}{tier}", out / f)


def _run(argv: list[str]) -> int:
    """condcli's CLI on ``argv`` in this process; its exit code (99: an exception escaped it)."""
    from condcli.cli.main import main

    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 3
    except BaseException:
        traceback.print_exc()
        code = 99
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _error_line(err: str) -> str:
    """The last ``error:`` line of a run's stderr ('' without one)."""
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    return lines[-1][:400] if lines else ""


def classify(workdir: Path, timed_out: bool, kind: str, name: str) -> dict[str, Any]:
    """The class of one finished case, from its result.json, stdout and stderr."""
    path = workdir / "result.json"
    result: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"kind": kind, "name": name}
    err = (workdir / "stderr").read_text(errors="replace") if (workdir / "stderr").exists() else ""
    result["error"] = _error_line(err)
    if timed_out:
        result["class"] = "timeout" if result.get("built") else "not built"
        ran = "condcli ran past the timeout" if result.get("built") else "build past the timeout"
        result.setdefault("why", ran)
        return result
    if not result.get("built", False):
        result["class"] = "not built"
        return result
    rc = result.get("rc")
    if rc is None:
        result["class"] = "crash"
        result["error"] = result["error"] or (err.strip().splitlines() or ["killed"])[-1][:400]
        return result
    if rc == 0:
        try:
            report = json.loads((workdir / "stdout").read_text())
        except ValueError:
            result["class"] = "crash"
            result["error"] = "stdout is not JSON"
            return result
        layers = report.get("layers", [])
        refused = report.get("layers_refused", [])
        result["family"] = report.get("model", {}).get("family")
        result["layers"] = len(layers)
        result["refused_layers"] = len(refused)
        result["sources"] = sorted({str(layer.get("qkv_source")) for layer in layers})
        codes = []
        for r in refused:
            reason = r.get("reason")
            code = reason.get("code") if isinstance(reason, dict) else None
            codes.append(code or "uncoded")
        text = [
            (r.get("reason") or {}).get("text") if isinstance(r.get("reason"), dict) else r.get("refused")
            for r in refused
        ]
        if layers and any(s == "generic (unverified)" for s in result["sources"]):
            result["class"] = "unverified"
        elif layers:
            result["class"] = "verified"
        elif refused:
            result["class"] = "refused"
        else:
            result["class"] = "refused"
            codes = ["uncoded"]
            text = ["no layer analysed and none refused"]
        if codes:
            result["code"] = codes[0]
            result["reason"] = str(text[0])[:400]
        return result
    if rc == 2 and ROUND_TRIP.search(result["error"]) and not CODE_IN_LINE.search(result["error"]):
        result["class"] = "not built"  # the tiny config did not survive save_pretrained → load: the sweep's
        result["why"] = (
            "the tiny config does not load back: " + result["error"][7:300]
        )  # fault, not condcli's
        return result
    if rc == 2:
        match = CODE_IN_LINE.search(result["error"])
        result["class"] = "refused"
        result["code"] = match.group(1) if match else "uncoded"
        result["reason"] = result["error"]
        return result
    result["class"] = "crash" if rc in (3, 99) else "failed"
    if rc == 99 and not result["error"]:
        result["error"] = (err.strip().splitlines() or [""])[-1][:400]
    return result


def hf_cases() -> list[str]:
    """Every model type with a base model class (AutoModel)."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(t for t in CONFIG_MAPPING.keys() if t in MODEL_MAPPING_NAMES)


SMALL = ("atto", "femto", "pico", "nano", "tiny", "xxs", "xs", "small", "s0", "b0", "_t", "mobile")


def timm_cases(count: int) -> list[str]:
    """``count`` timm models across families: the smallest-named model of each module first, then a second."""
    import timm

    picks: list[list[str]] = []
    for module in sorted(timm.list_modules()):
        names = [n for n in timm.list_models(module=module) if "test" not in n]
        if not names:
            continue

        def rank(n: str) -> tuple[int, int, str]:
            small = next((i for i, s in enumerate(SMALL) if s in n), len(SMALL))
            return (small, len(n), n)

        picks.append(sorted(names, key=rank)[:3])
    chosen: list[str] = []
    for round_ in range(3):
        for names in picks:
            if len(names) > round_ and len(chosen) < count:
                chosen.append(names[round_])
    return sorted(chosen)


def warm_up(tmp: Path) -> None:
    """One run in this process before forking, so that every child starts with condcli's lazy imports done
    (they cost more than a tiny model's analysis). On one torch thread: GNU OpenMP's threads do not survive a
    fork, and a child's first parallel op would wait for them forever; the children start their own."""
    import torch

    from condcli.cli.main import main as cli

    torch.set_num_threads(1)

    folder = tmp / "warm"
    build_hf("bert", folder)
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        cli([*SPECTRUM[:1], str(folder), *SPECTRUM[1:]])
        cli([*SPECTRUM[:1], "vit_tiny_patch16_224", "--weights", "random", *SPECTRUM[1:]])
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)


def run_all(
    cases: list[tuple[str, str]], jobs: int, timeout: float, root: Path, log: Path | None = None
) -> list[dict[str, Any]]:
    """Every case in a forked child, ``jobs`` at a time; each result also appended to ``log`` (JSON lines) as
    it comes."""
    ctx = mp.get_context("fork")
    threads = max(1, (os.cpu_count() or 1) // jobs)
    pending = list(enumerate(cases))
    running: dict[int, tuple[Any, float, Path, str, str]] = {}
    results: list[dict[str, Any]] = []
    while pending or running:
        while pending and len(running) < jobs:
            i, (kind, name) = pending.pop(0)
            work = root / f"{i:04d}"
            work.mkdir()
            proc = ctx.Process(target=child, args=(kind, name, str(work), timeout, threads))
            proc.start()
            running[i] = (proc, time.monotonic(), work, kind, name)
        time.sleep(0.2)
        for i, (proc, start, work, kind, name) in list(running.items()):
            late = time.monotonic() - start > timeout
            if proc.is_alive() and not late:
                continue
            if proc.is_alive():
                proc.kill()
            proc.join()
            del running[i]
            res = classify(work, late, kind, name)
            res["seconds"] = round(time.monotonic() - start, 1)
            results.append(res)
            if log is not None:
                with log.open("a") as f:
                    f.write(json.dumps(res) + "\n")
            tag = res.get("code") or res.get("why", "")
            print(f"[{len(results)}/{len(cases)}] {kind} {name}: {res['class']} {tag}"[:200], flush=True)
    return sorted(results, key=lambda r: (r["kind"], r["name"]))


def table(results: list[dict[str, Any]], header: str) -> str:
    """The markdown page: counts per class and kind, then one row per case."""
    lines = [header, ""]
    for kind, label in (("hf", "transformers model types"), ("timm", "timm models")):
        rows = [r for r in results if r["kind"] == kind]
        counts = Counter(r["class"] for r in rows)
        codes = Counter(r.get("code", "uncoded") for r in rows if r["class"] == "refused")
        lines.append(
            f"**{label}** ({len(rows)}): "
            + ", ".join(f"{c} {counts[c]}" for c in sorted(counts))
            + (
                ""
                if not codes
                else " — refused by code: " + ", ".join(f"{c} {n}" for c, n in sorted(codes.items()))
            )
        )
        lines.append("")
    lines += [
        "| kind | model | class | code | layers (analysed/refused) | what was said |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        said = r.get("reason") or r.get("error") or r.get("why") or ""
        said = said.replace("|", "\\|").replace("\n", " ")[:220]
        shown = f"{r.get('layers', '')}/{r.get('refused_layers', '')}" if "layers" in r else ""
        lines.append(f"| {r['kind']} | {r['name']} | {r['class']} | {r.get('code', '')} | {shown} | {said} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--timm", type=int, default=100, help="how many timm models (0: none)")
    parser.add_argument("--no-hf", action="store_true")
    parser.add_argument(
        "--only", nargs="*", default=None, help="run only these names (hf types / timm names)"
    )
    parser.add_argument("--out-json", type=Path, default=Path("docs/breadth.json"))
    parser.add_argument("--out-md", type=Path, default=Path("docs/breadth.md"))
    parser.add_argument("--shuffle", action="store_true", help="run the cases in a seeded random order")
    parser.add_argument("--limit", type=int, default=0, help="run only the first N cases (after --shuffle)")
    parser.add_argument("--label", default="", help="a line under the title (the commit swept)")
    parser.add_argument(
        "--condcli", type=Path, default=None, help="sweep the condcli of this checkout instead"
    )
    parser.add_argument(
        "--skip", type=Path, nargs="*", default=[], help="logs (.jsonl) of cut runs: not rerun"
    )
    parser.add_argument("--render", type=Path, default=None, help="only write the table of this .jsonl")
    parser.add_argument("--compare", type=Path, default=None, help="a .jsonl of an earlier run: before/after")
    args = parser.parse_args()
    if args.render is not None:
        done = [reclassify(r) for r in _read_log(args.render)]
        before = None if args.compare is None else [reclassify(r) for r in _read_log(args.compare)]
        write(sorted(done, key=lambda r: (r["kind"], r["name"])), args, before)
        return
    if (
        args.condcli is not None
    ):  # another checkout (the starting commit): ahead of the editable install's finder
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "")]
        sys.path.insert(0, str(args.condcli.resolve()))
    import timm  # noqa: F401
    import transformers  # noqa: F401

    import condcli.cli.main  # noqa: F401  the heavy imports, once, before forking

    cases: list[tuple[str, str]] = []
    if not args.no_hf:
        cases += [("hf", t) for t in hf_cases()]
    if args.timm:
        cases += [("timm", n) for n in timm_cases(args.timm)]
    if (
        args.shuffle
    ):  # any prefix of the run is then a sample of all families (a run cut short still says something)
        random.Random(0).shuffle(cases)
    if args.limit:
        cases = cases[: args.limit]
    skipped = {(r["kind"], r["name"]) for log in args.skip for r in _read_log(log)}
    cases = [c for c in cases if c not in skipped]
    if args.only:
        cases = [c for c in cases if c[1] in args.only] or [
            ("timm" if "_" in n and n not in dict(cases) else "hf", n) for n in args.only
        ]
    with tempfile.TemporaryDirectory(prefix="condcli-sweep-") as tmp:
        warm_up(Path(tmp))
        results = run_all(cases, args.jobs, args.timeout, Path(tmp), args.out_json.with_suffix(".jsonl"))
    write(results, args)


def _read_log(log: Path) -> list[dict[str, Any]]:
    """The results of a run's log (JSON lines), the last line of each case kept (a case rerun replaces it)."""
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for line in log.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            results[(r["kind"], r["name"])] = r
    return list(results.values())


def reclassify(result: dict[str, Any]) -> dict[str, Any]:
    """A logged result under this script's rules (a load-back failure of the tiny config is not built)."""
    error = result.get("error", "")
    if result.get("class") == "refused" and result.get("code") == "uncoded" and ROUND_TRIP.search(error):
        result = {
            **result,
            "class": "not built",
            "why": "the tiny config does not load back: " + error[7:300],
        }
        result.pop("code", None)
        result.pop("reason", None)
    return result


def comparison(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """Counts per class of the cases both runs reached, before and after, and what became of each crash."""
    old = {(r["kind"], r["name"]): r for r in before}
    new = {(r["kind"], r["name"]): r for r in after}
    common = sorted(old.keys() & new.keys())
    lines = [f"## Before and after, on the {len(common)} cases both runs reached", ""]
    lines += ["| kind | class | before | after |", "|---|---|---|---|"]
    for kind in ("hf", "timm"):
        b = Counter(old[k]["class"] for k in common if k[0] == kind)
        a = Counter(new[k]["class"] for k in common if k[0] == kind)
        for c in sorted(b.keys() | a.keys()):
            lines.append(f"| {kind} | {c} | {b[c]} | {a[c]} |")
    lines += ["", "What became of each crash and timeout of the earlier run:", ""]
    lines += ["| kind | model | before | after | said after |", "|---|---|---|---|---|"]
    for k in common:
        if old[k]["class"] in ("crash", "timeout"):
            r = new[k]
            said = (r.get("reason") or r.get("error") or r.get("why") or "").replace("|", "\\|")[:160]
            after = r["class"] + (f" ({r['code']})" if r.get("code") else "")
            lines.append(f"| {k[0]} | {k[1]} | {old[k]['class']} | {after} | {said} |")
    return "\n".join(lines) + "\n\n"


def write(
    results: list[dict[str, Any]], args: argparse.Namespace, before: list[dict[str, Any]] | None = None
) -> None:
    """The JSON of every case and the markdown table (with a before/after section given ``before``)."""
    args.out_json.parent.mkdir(parents=True, exist_ok=True)
    args.out_json.write_text(json.dumps(results, indent=1) + "\n")
    header = (
        "# Breadth: condcli spectrum over tiny random models\n\n"
        "Made by `bench/sweep_architectures.py` (issue 42): `condcli spectrum --max-samples 2 --layers 0,-1 "
        "--json` on every transformers model type that builds offline with a tiny random config, and timm "
        "models across families with `--weights random`. " + args.label + "\n\n"
        "Classes: **verified** (every analysed layer's Q/K/V reading is a family's or proven on the first"
        " batch), **unverified** (a generic reading not proven), **refused** with its code (`no-"
        "attention`: no softmax over keys and no attention module ran; `linear-attention`: an attention "
        "ran and no softmax P exists; `qkv-unreadable`: attention ran, and what stands between X and "
        "q/k/v is named; `p-unobservable`: P cannot be observed, and why; `inputs`: the model needs "
        "inputs condcli does not make, and which), **crash** (exit 3), **timeout**, **not built** (the "
        "tiny config cannot be built or saved and loaded back offline: a limit of this sweep, not of "
        "condcli).\n\n"
        "Rerun: `nice -n 10 python bench/sweep_architectures.py --shuffle --jobs 3` (all cases; "
        "`--skip LOG.jsonl` continues a cut run; `--limit "
        "N` for the first N of the seeded order, `--only NAME …` for some); `--render LOG.jsonl --compare"
        " OLD.jsonl` rewrites this page from a run's log."
    )
    page = table(results, header)
    if before is not None:
        cut = page.index("| kind | model |")
        page = page[:cut] + comparison(before, results) + "## Every case\n\n" + page[cut:]
    args.out_md.write_text(page)
    print(json.dumps(Counter(f"{r['kind']}:{r['class']}" for r in results), indent=1))


if __name__ == "__main__":
    main()
