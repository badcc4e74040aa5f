"""The colours every figure uses, matplotlib and the page alike: the Okabe–Ito palette (safe for the common
colour-vision deficiencies; no pure red, green or yellow) for the roles, and the part of viridis that keeps
its contrast on white for depth (its yellow end is left out)."""

from __future__ import annotations

# Okabe & Ito (2008), "Color Universal Design": the eight colours, yellow included only to be left out.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
}
GREY = "#666666"  # neutral: the index m of rank-decay

# Each colour role of a description (condcli.figures.model.ROLES): the plain X vermillion (the paper's
# red), the conditioned X + λ·I_k bluish green (its green), the reference lines in the other hues.
ROLE_COLORS = {
    "plain": OKABE_ITO["vermillion"],
    "conditioned": OKABE_ITO["bluish green"],
    "bound": OKABE_ITO["black"],
    "corrected": OKABE_ITO["blue"],
    "target": OKABE_ITO["reddish purple"],
    "recommended": OKABE_ITO["orange"],
    "index": GREY,
}

# The part of viridis a depth colour is taken from: 0.78 is a mid green; above it viridis turns to the
# light green and yellow that vanish on white.
DEPTH_TOP = 0.78


def luminance(hex_color: str) -> float:
    """The relative luminance (WCAG 2) of ``#rrggbb``."""
    channels = [int(hex_color[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_on_white(hex_color: str) -> float:
    """The WCAG contrast ratio of ``#rrggbb`` against white (1 for white, 21 for black)."""
    return 1.05 / (luminance(hex_color) + 0.05)
