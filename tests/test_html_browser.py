"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) loads the report.html that
``--out`` wrote for spectrum, sweep-lambda, rank-decay, check and compare, runs its scripts, and the tests
read the DOM it dumps, its console and a screenshot.

- the DOM after the scripts have run (``--dump-dom`` with a virtual-time budget) holds the report's numbers:
  κ(X) median as the CLI rounds it, each layer name (and check's rules, compare's B/A);
- no console errors: a probe script, put into a copy of the page (never into the product), records
  ``console.error`` calls, uncaught exceptions (also syntax errors), failed resource loads and unhandled
  rejections into an attribute of ``<html>``, and Chromium's own log (``--enable-logging=stderr``) is read
  for "Uncaught" lines; :func:`test_the_console_check_catches_broken_scripts` proves both catch a broken
  page;
- the layout the probe measures (``getBoundingClientRect``): a compact header with the κ(X) headline above
  the fold, related charts side by side;
- the screenshot (1280 × 2000) is not blank: pixel variance and the area and height non-background pixels
  cover (:func:`test_the_blank_check_catches_blank_images` proves the check fails on blank images).

Without chromium these tests skip with the reason, except under CI (``CI=true``, set by .ci/run, which also
installs chromium): there they fail.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

CHROMIUM = shutil.which("chromium")
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
FAST = ("--max-samples", "2", "--batch-size", "2")
# command → its arguments; each runs in-process with --out DIR (check: one rule fails, one passes)
COMMANDS: dict[str, tuple[str, ...]] = {
    "spectrum": ("spectrum", *FAST),
    "sweep-lambda": ("sweep-lambda", *FAST, "--lambdas", "1,10,100", "--layers", "0,-1"),
    "rank-decay": ("rank-decay", *FAST),
    "check": ("check", *FAST, "--max-kappa", "100", "--max-mu-la", "1e30", "--baseline", "{spectrum}"),
    "compare": ("compare", "vit-plain", "vit-conditioned", *FAST),
}
EXIT = {"check": 1}  # κ(X) of the sample ViT is above 100: that rule fails
PROBE = """<script>(function(){var d=document.documentElement,errs=[];
function note(m){errs.push(String(m));d.setAttribute('data-probe-errors',JSON.stringify(errs));}
d.setAttribute('data-probe-errors','[]');
var orig=console.error;console.error=function(){
 note('console.error: '+Array.prototype.map.call(arguments,String).join(' '));
 return orig.apply(console,arguments);};
window.addEventListener('error',function(e){var t=e.target;
 note(t&&t!==window&&(t.src||t.href)?'failed to load '+(t.src||t.href):'uncaught: '+e.message);},true);
window.addEventListener('unhandledrejection',function(e){note('unhandled rejection: '+e.reason);});
window.addEventListener('load',function(){var boxes={};
 ['header.top','header .headline','#chart-layers-kappa','#chart-layers-mu','#curves-plain','#heat-plain',
  '#compare-chart-kappa','#compare-chart-mu_la'].forEach(function(s){var e=document.querySelector(s);
  if(e){var b=e.getBoundingClientRect();boxes[s]=[b.left,b.top,b.width,b.height];}});
 d.setAttribute('data-probe-boxes',JSON.stringify(boxes));d.setAttribute('data-probe-loaded','1');});
})();</script>"""


@dataclass(frozen=True)
class Loaded:
    """What Chromium made of a page: the DOM after scripts ran, its text, the console errors, a screenshot."""

    dom: str
    text: str
    errors: list[str]
    screenshot: Path
    boxes: dict[str, list[float]]  # CSS selector → [left, top, width, height] px of its first element


class _Text(HTMLParser):
    """The text a reader sees (scripts and styles left out), attribute values apart."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style") and self.skip > 0

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def visible_text(dom: str) -> str:
    parser = _Text()
    parser.feed(dom)
    return " ".join(" ".join(parser.parts).split())


def load(browser: str, page: Path, work: Path) -> Loaded:
    """Open a copy of ``page`` with the probe in Chromium; the DOM after 5 s of virtual time, the errors
    the probe and Chromium's log saw, and a 1280 × 2000 screenshot."""
    work.mkdir(parents=True, exist_ok=True)
    source = page.read_text(encoding="utf-8")
    head = re.search(r"<head[^>]*>", source)
    assert head is not None, f"{page} has no <head>"
    probed = work / "probed.html"
    probed.write_text(source[: head.end()] + PROBE + source[head.end() :], encoding="utf-8")
    shot = work / "shot.png"
    args = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--mute-audio",
        f"--user-data-dir={work / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--window-size=1280,2000",
        f"--screenshot={shot}",
        "--dump-dom",
        probed.as_uri(),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=work)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    tag = re.search(r"<html[^>]*>", dom)
    assert tag is not None, "no <html> in the dumped DOM"
    found = re.search(r'data-probe-errors="([^"]*)"', tag.group(0))
    assert found is not None, "the probe did not run: the page blocked or lost it"
    assert 'data-probe-loaded="1"' in tag.group(0), "the page never finished loading"
    errors = [str(e) for e in json.loads(html.unescape(found.group(1)))]
    errors += [line for line in done.stderr.splitlines() if ":CONSOLE" in line and "Uncaught" in line]
    boxes = re.search(r'data-probe-boxes="([^"]*)"', tag.group(0))
    assert boxes is not None, "the probe measured nothing"
    return Loaded(dom, visible_text(dom), errors, shot, json.loads(html.unescape(boxes.group(1))))


def blank_problems(path: Path) -> list[str]:
    """Why a screenshot looks blank (empty list: it does not): too little variance, too little area or
    height covered by pixels that differ from the background (its most common colour)."""
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.int32)
    height = rgb.shape[0]
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    colours, counts = np.unique(packed, return_counts=True)
    top = int(colours[counts.argmax()])
    background = np.array([top >> 16, (top >> 8) & 255, top & 255])
    ink = np.abs(rgb - background).sum(axis=2) > 48
    problems = []
    if float(rgb.std()) < 8.0:
        problems.append(f"pixel standard deviation {rgb.std():.1f} < 8")
    if not 0.02 <= ink.mean() <= 0.9:
        problems.append(f"non-background pixels cover {ink.mean():.1%} of the image, not 2–90 %")
    rows = np.flatnonzero(ink.any(axis=1))
    span = (rows[-1] - rows[0] + 1) / height if rows.size else 0.0
    if span < 0.5:
        problems.append(f"content spans {span:.0%} of the height, under half")
    return problems


def layer_names(report: dict[str, Any]) -> set[str]:
    """Every layer name the report holds (per-layer table, rank decay, sweep, both sides of a compare)."""
    found: set[str] = set()
    for part in (report, report.get("a") or {}, report.get("b") or {}):
        for key in ("layers",):
            found |= {str(layer["name"]) for layer in part.get(key) or [] if layer.get("name")}
        for nest in ("rank_decay", "sweep"):
            inner = part.get(nest) or {}
            found |= {str(layer["name"]) for layer in inner.get("layers") or [] if layer.get("name")}
    return found


def kappa_text(embedding: dict[str, Any]) -> str:
    """κ(X) median as the CLI prints it, checked against NumPy's median of the per-sample values."""
    kappa = embedding["kappa"]
    median = float(kappa["median"])
    assert median == pytest.approx(float(np.median(np.asarray(kappa["per_sample"], float))), rel=1e-12)
    floor = isinstance(kappa.get("floor"), dict) and kappa["floor"].get("median") is True
    return f"≥ {median:.2g}" if floor else f"{median:.3g}"


@pytest.fixture(scope="module")
def browser() -> str:
    if CHROMIUM is None:
        if IN_CI:
            pytest.fail(
                "chromium is missing, and CI must run the browser tests (.ci/run installs it with apt-get)"
            )
        pytest.skip(
            "chromium is not installed (apt-get install chromium); CI installs it and runs these tests"
        )
    return CHROMIUM


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """command → its --out folder, made once by the real CLI (report.json and report.html)."""
    from condcli.cli.main import main

    root = tmp_path_factory.mktemp("reports")
    out: dict[str, Path] = {}
    for command, argv in COMMANDS.items():
        folder = root / command
        args = [a.replace("{spectrum}", str(out.get("spectrum", root) / "report.json")) for a in argv]
        assert main([*args, "--out", str(folder)]) == EXIT.get(command, 0), command
        out[command] = folder
    return out


@pytest.fixture(scope="module")
def loaded(
    browser: str, written: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Loaded]:
    work = tmp_path_factory.mktemp("browser")
    return {c: load(browser, folder / "report.html", work / c) for c, folder in written.items()}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_scripts_ran_and_the_dom_holds_kappa_and_every_layer(
    command: str, loaded: dict[str, Loaded], written: dict[str, Path]
) -> None:
    data = json.loads((written[command] / "report.json").read_text(encoding="utf-8"))
    page = loaded[command]
    assert re.search(r'<html[^>]*class="[^"]*\bjs\b', page.dom), "the page's script did not run (no class js)"
    sides = [data["a"], data["b"]] if command == "compare" else [data]
    for side in sides:
        assert kappa_text(side["embedding"]) in page.text, f"κ(X) median {kappa_text(side['embedding'])}"
        assert str(side["model"]["spec"]) in page.text
    names = layer_names(data)
    assert names, f"the {command} report names no layer"
    missing = sorted(n for n in names if n not in page.text)
    assert not missing, f"layer names not on the page: {missing}"


def test_check_page_shows_every_rule_with_its_result(
    loaded: dict[str, Loaded], written: dict[str, Path]
) -> None:
    data = json.loads((written["check"] / "report.json").read_text(encoding="utf-8"))
    text = loaded["check"].text
    rules = [c for c in data["checks"] if c["rule"] != "baseline"]
    assert {c["passed"] for c in rules} == {True, False}  # the fixture has one of each
    assert "check failed" in text
    rows = re.findall(
        r"<tr>(.*?)</tr>", loaded["check"].dom.split('id="check-rules-table"')[1].split("</table>")[0]
    )
    cells = [visible_text(row) for row in rows]
    for c in rules:
        row = next((r for r in cells if r.startswith(c["rule"] + " ")), None)
        assert row is not None, f"no row for rule {c['rule']}"
        assert ("PASS" if c["passed"] else "FAIL") in row
        assert f"{float(c['value']):.3g}" in row or f"{float(c['value']):.4g}" in row
    assert f"{data['baseline']['compared']}" in text  # how many baseline metrics were compared


def test_compare_page_shows_both_models_and_the_ratio(
    loaded: dict[str, Loaded], written: dict[str, Path]
) -> None:
    data = json.loads((written["compare"] / "report.json").read_text(encoding="utf-8"))
    a, b = (float(data[s]["embedding"]["kappa"]["median"]) for s in "ab")
    text = loaded["compare"].text
    assert f"{b / a:.3g}" in text  # κ(X)'s B/A, from the two medians
    assert data["a"]["model"]["spec"] in text and data["b"]["model"]["spec"] in text


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_header_is_compact_and_the_kappa_headline_above_the_fold(
    command: str, loaded: dict[str, Loaded]
) -> None:
    """At 1280 px wide the header takes at most 260 px, and the headline numbers end within the first 800
    (a laptop screen's first view)."""
    boxes = loaded[command].boxes
    assert boxes["header.top"][3] <= 260, boxes["header.top"]
    _, top, width, height = boxes["header .headline"]
    assert width > 0 and top + height <= 800


@pytest.mark.parametrize(
    ("command", "first", "second"),
    [
        ("spectrum", "#chart-layers-kappa", "#chart-layers-mu"),
        ("rank-decay", "#curves-plain", "#heat-plain"),
        ("compare", "#compare-chart-kappa", "#compare-chart-mu_la"),
    ],
)
def test_related_charts_span_the_width_one_under_the_other(
    command: str, first: str, second: str, loaded: dict[str, Loaded]
) -> None:
    """Each line chart takes the main column's full width (a paper figure's detail stays legible), the
    next one under it."""
    a, b = loaded[command].boxes[first], loaded[command].boxes[second]
    assert b[1] >= a[1] + a[3] - 2, (a, b)  # under the first
    if command != "compare":
        assert a[2] >= 0.8 * (1280 - 260), a  # about the width of the page less the contents list


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_console_errors(command: str, loaded: dict[str, Loaded]) -> None:
    assert loaded[command].errors == []


@pytest.mark.parametrize("command", list(COMMANDS))
def test_screenshot_is_not_blank(command: str, loaded: dict[str, Loaded]) -> None:
    shot = loaded[command].screenshot
    assert Image.open(shot).size == (1280, 2000)
    assert blank_problems(shot) == []


def test_the_console_check_catches_broken_scripts(
    browser: str, written: dict[str, Path], tmp_path: Path
) -> None:
    """A copy of a real page with its own script broken (a syntax error), a call of an undefined function,
    a console.error and an image that cannot load: each is reported."""
    page = (written["spectrum"] / "report.html").read_text(encoding="utf-8")
    start = page.rindex("<script>") + len("<script>")
    broken = page[:start] + "var = ;" + page[start:]  # the page's own script no longer parses
    extra = "<script>notDefinedAnywhere();</script>" + '<script>console.error("deliberate")</script>'
    extra += '<img src="gone.png">'
    broken = broken.replace("</body>", extra + "</body>")
    (tmp_path / "broken.html").write_text(broken, encoding="utf-8")
    errors = load(browser, tmp_path / "broken.html", tmp_path / "run").errors
    text = "\n".join(errors)
    assert "SyntaxError" in text
    assert "notDefinedAnywhere" in text
    assert "console.error: deliberate" in text
    assert "failed to load" in text and "gone.png" in text
    assert any(":CONSOLE" in e and "Uncaught" in e for e in errors)  # Chromium's own log too


def test_the_blank_check_catches_blank_images(tmp_path: Path) -> None:
    white = tmp_path / "white.png"
    Image.new("RGB", (1280, 2000), "white").save(white)
    assert blank_problems(white)
    header_only = Image.new("RGB", (1280, 2000), "white")
    header_only.paste((40, 40, 40), (0, 0, 1280, 300))  # a header and nothing below it
    header_only.save(tmp_path / "header.png")
    assert blank_problems(tmp_path / "header.png")


def test_readme_screenshot_is_a_small_real_page() -> None:
    """docs/demo-report.png: made by ``condcli spectrum --out DIR`` in the repository root (the shipped
    sample, as make demo), ``chromium --headless --no-sandbox --hide-scrollbars --window-size=1280,1500
    --screenshot=shot.png DIR/report.html``, reduced to 128 colours with Pillow (``quantize``)."""
    root = Path(__file__).resolve().parents[1]
    shot = root / "docs" / "demo-report.png"
    assert "](docs/demo-report.png)" in (root / "README.md").read_text(encoding="utf-8")
    assert shot.stat().st_size < 300_000
    assert Image.open(shot).size == (1280, 1500)
    assert blank_problems(shot) == []
