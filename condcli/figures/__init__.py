"""What each figure shows, described once (:mod:`.model`): built from a parsed JSON report by one function
per figure, drawn by :mod:`condcli.plots` (matplotlib) and :mod:`condcli.html` (inline SVG) alike. Imports
no drawing library."""

from condcli.figures.model import (
    ANNOTATE_MAX,
    BAND_ALPHA,
    INF_ENTRY,
    LEGEND_MAX,
    ROLES,
    Axis,
    Band,
    DepthBar,
    Entry,
    Figure,
    Heatmap,
    Panel,
    Ref,
    Series,
    depth,
    depth_of,
)

__all__ = [
    "ANNOTATE_MAX",
    "BAND_ALPHA",
    "INF_ENTRY",
    "LEGEND_MAX",
    "ROLES",
    "Axis",
    "Band",
    "DepthBar",
    "Entry",
    "Figure",
    "Heatmap",
    "Panel",
    "Ref",
    "Series",
    "depth",
    "depth_of",
]
