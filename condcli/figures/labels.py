"""A description's text (Unicode, as the tables print it: "κ(X_l)", "σ_i", "X + λ·I_k") as each renderer
sets it: matplotlib mathtext ("$\\kappa(X_\\ell)$") for the PNG/SVG/PDF figures, and SVG or HTML with real
subscripts for the page ("κ(X" + a subscript "ℓ" + ")"), so that no "_" is ever visible.

A subscript or superscript is "_x"/"^x" after a single letter that starts a word ("X_l", "W_Q^h", "σ_max");
"layer_10" or "blocks.attn_q" (a module's name) is left as it is. The subscript l is set as ℓ."""

from __future__ import annotations

import re
from html import escape

GREEK = {
    "α": r"\alpha",
    "β": r"\beta",
    "κ": r"\kappa",
    "λ": r"\lambda",
    "μ": r"\mu",
    "σ": r"\sigma",
    "Σ": r"\Sigma",
    "ℓ": r"\ell",
}
OPERATORS = {"·": r"\cdot", "−": "-", "≤": r"\leq", "≥": r"\geq", "×": r"\times"}

_LETTER = "A-Za-zΑ-Ωα-ωℓ"
_SCRIPT = r"[A-Za-z0-9ℓ]+"
# a letter starts a word after anything but a letter, digit, "_" or "."; also after an operator Σ ("Σσ_i")
# or a coefficient of one or two digits that itself starts a word ("2σ_1", not the "2d_1" of "conv2d_1")
_WORD = f"[{_LETTER}0-9_.]"
_AFTER = rf"(?:(?<!{_WORD})|(?<=(?<!{_WORD})Σ)|(?<=(?<!{_WORD})\d)|(?<=(?<!{_WORD})\d\d))"
# a single letter starting a word, or the closing bar of a norm ("‖X‖_F"), followed by its sub- and
# superscripts
_SCRIPTED = re.compile(rf"({_AFTER}[{_LETTER}]|(?<=[{_LETTER}])‖)((?:[_^]{_SCRIPT})+)(?![_^])")
_PART = re.compile(rf"([_^])({_SCRIPT})")
# one unit of mathematics: a letter with scripts, a Greek letter, a number, or a group in parentheses whose
# spaces are only around operators ("(X + λ·I_k)", not "(max over heads)")
_GROUP = r"\((?:[^()\s]|\s[+−=·/]\s)*\)"
_UNIT = (
    rf"(?:[{_LETTER}](?:[_^]{_SCRIPT})+|[Α-Ωα-ωℓ](?![_^])|\d+(?:\.\d+)?(?:e[+-]?\d+)?|{_GROUP})"
    rf"(?:{_GROUP})?"
)
_LATIN = r"[A-Za-z](?![A-Za-z0-9_])"
_OP = r"(?:\s?[+−·/=]\s?|\s[≤≥]\s)"
_START = rf"(?<![{_LETTER}0-9_.])"  # not inside a word or a module's name
_EXPR = re.compile(rf"{_START}(?:{_UNIT}|{_LATIN})(?:{_OP}?(?:{_UNIT}|{_LATIN}))*")
_GREEK = re.compile(r"[Α-Ωα-ωℓ]")
_EXPONENT = re.compile(r"(\d+(?:\.\d+)?)e([+-]?)0*(\d+)")


def _mathy(expr: str) -> bool:
    """Whether a run is mathematics: it has a Greek letter or a script ("layer 3", "(blocks.attn_q)" not)."""
    return bool(_GREEK.search(expr) or _SCRIPTED.search(expr))


def _script(kind: str, text: str) -> str:
    """One sub- or superscript in mathtext: ℓ for l, a word upright ("max")."""
    if text == "l":
        return kind + r"{\ell}"
    if len(text) > 1 and text.isalpha():
        return kind + r"{\mathrm{" + text + "}}"
    return kind + "{" + text + "}"


def _math(expr: str) -> str:
    """An expression of :data:`_EXPR` in mathtext (without the dollars)."""

    def scripted(m: re.Match[str]) -> str:
        base = GREEK.get(m.group(1), m.group(1))
        return "{" + base + "}" + "".join(_script(k, t) for k, t in _PART.findall(m.group(2)))

    def power(m: re.Match[str]) -> str:  # 1.4e+02 → 1.4×10^{2}
        sign = "-" if m.group(2) == "-" else ""
        return m.group(1) + r"{\times}10^{" + sign + m.group(3) + "}"

    out = _EXPONENT.sub(power, expr)
    out = _SCRIPTED.sub(scripted, out)
    for char, command in {**GREEK, **OPERATORS}.items():
        out = out.replace(char, "{" + command + "}")
    return out.replace("%", r"\%")


def mathtext(text: str) -> str:
    """``text`` for matplotlib: each run of mathematics in ``$…$`` ("κ(X_l) per layer" →
    "$\\kappa(X_\\ell)$ per layer"); a literal "$" escaped. Runs without a Greek letter or a script stay
    text ("layer 3", "p10–p90")."""
    out: list[str] = []
    last = 0
    for m in _EXPR.finditer(text):
        if not _mathy(m.group(0)):
            continue
        out.append(text[last : m.start()].replace("$", r"\$"))
        out.append("$" + _math(m.group(0)) + "$")
        last = m.end()
    out.append(text[last:].replace("$", r"\$"))
    return "".join(out)


def _marked(text: str, sub: tuple[str, str], sup: tuple[str, str]) -> str:
    """``text`` escaped, its scripts between the given opening and closing markup."""
    out: list[str] = []
    last = 0
    for m in _SCRIPTED.finditer(text):
        out.append(escape(text[last : m.start()]) + escape(m.group(1)))
        for kind, script in _PART.findall(m.group(2)):
            shown = "ℓ" if script == "l" else script
            opening, closing = sub if kind == "_" else sup
            out.append(opening + escape(shown) + closing)
        last = m.end()
    out.append(escape(text[last:]))
    return "".join(out)


def svg_text(text: str) -> str:
    """``text`` as the content of an SVG ``<text>``: escaped, each script a smaller shifted ``<tspan>``."""
    return _marked(
        text,
        ('<tspan class="sub" baseline-shift="sub" font-size="75%">', "</tspan>"),
        ('<tspan class="sup" baseline-shift="super" font-size="75%">', "</tspan>"),
    )


def html_text(text: str) -> str:
    """``text`` as HTML: escaped, each script in ``<sub>``/``<sup>``."""
    return _marked(text, ("<sub>", "</sub>"), ("<sup>", "</sup>"))


def shown(text: str) -> str:
    """The characters a reader sees of ``text`` on the page (its scripts inline, l as ℓ, no "_" or "^")."""
    return _SCRIPTED.sub(
        lambda m: m.group(1) + "".join("ℓ" if t == "l" else t for _, t in _PART.findall(m.group(2))), text
    )
