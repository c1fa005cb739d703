"""One visual style for every figure mpvlab draws (`mpvlab plot` and the report): label, order,
colour, marker, hatch and line style per congestion control, scheduler, path and ABR algorithm, and
matplotlib settings that read at a paper's column width.

Where the look of each name comes from: `STYLE_TABLE`, one mapping kind → name → Entry. It is the
one place to change; when the component registries (cc, schedulers, ABR, topology kinds) carry
label/colour/order themselves, `STYLE_TABLE` is built from them and nothing else here changes.
A name not in the table (a new CC, a path named "5g") gets a spare colour/marker/hatch by its rank
among the unknown names of that kind in the figure, so a figure never shows two names alike.

Colours: the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), distinguishable with
the common colour-vision deficiencies and in greyscale by marker/hatch. CCs and paths take disjoint
colours, so a reader never confuses "CUBIC" with "the Wi-Fi path" across figures.

Sizes: a two-column paper's column is ~3.3–3.5 in (ACM 3.33, IEEE 3.5), a full-width figure ~7 in;
text at 8 pt (legends 7 pt) stays legible when the figure is placed at 100 %. PDF fonts are embedded
as TrueType (Type 42), which venues' checkers accept (Type 3 is often refused); SVG text is drawn as
paths so the file renders the same without the font installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping

if TYPE_CHECKING:   # for the annotation only: importing style must not import matplotlib
    from matplotlib.typing import RcKeyType

Kind = Literal["cc", "scheduler", "path", "abr"]


@dataclass(frozen=True)
class Entry:
    label: str
    order: int
    colour: str
    marker: str = "o"
    hatch: str = ""
    linestyle: str = "-"


# Okabe–Ito
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
GREY = "#7F7F7F"


def _from_registries() -> dict[str, dict[str, Entry]]:
    """CCs and schedulers look the way their registries say (mpvlab/cc/registry.py, mpvlab/schedulers/registry.py)."""
    from mpvlab.cc.registry import ENTRIES as CCS
    from mpvlab.schedulers.registry import ENTRIES as SCHEDULERS
    markers = ["o", "s", "^", "D", "v", "P"]
    return {
        "cc": {c.name: Entry(c.label, i, c.colour, c.marker) for i, c in enumerate(CCS)},
        "scheduler": {s.name: Entry(s.label, i, GREY, markers[i % len(markers)], s.hatch, s.linestyle)
                      for i, s in enumerate(SCHEDULERS)},
    }


STYLE_TABLE: dict[str, dict[str, Entry]] = {
    **_from_registries(),
    "path": {
        "wifi": Entry("Wi-Fi", 0, ORANGE, "o", "", "-"),
        "lte": Entry("LTE", 1, PURPLE, "s", "", "-"),
        "shared": Entry("shared", 2, SKY, "D", "", "-"),
    },
    "abr": {
        "gst": Entry("GStreamer", 0, BLUE, "o", "", "-"),
        "bba": Entry("BBA", 1, VERMILLION, "s", "", "--"),
    },
}

# For names the table does not know, per kind (never the table's colours of the same kind).
SPARE_COLOURS: dict[str, list[str]] = {
    # Paul Tol's muted colours: the Okabe-Ito ones are taken by the registered CCs and the paths.
    "cc": ["#882255", "#44AA99", "#999933", "#332288"],
    "scheduler": [GREY],
    "path": [SKY, YELLOW, BLACK, GREEN],
    "abr": [GREEN, PURPLE, ORANGE, SKY],
}
SPARE_MARKERS = ["D", "v", "P", "X", "*", "h"]
# Line hatches only: dot/circle hatches ("." "o") cost ~3,500 SVG path segments per pattern (a 640 KB bar chart).
SPARE_HATCHES = ["xxx", "+++", "---", "|||"]
SPARE_LINESTYLES = ["-.", (0, (5, 1, 1, 1)), (0, (1, 1))]

# Figure widths in inches.
COLUMN_W = 3.4
FULL_W = 7.0

# matplotlib settings applied with `matplotlib.rc_context(RC)` around every figure (no global change).
RC: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "figure.titlesize": 9,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.0,
    "lines.markersize": 4,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.35,
    "hatch.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "path",
    # Figures use layout="constrained" (legends outside the axes included) and are saved without
    # bbox_inches="tight", which draws every figure twice per format (measured: 2× the render time).
    "figure.constrained_layout.h_pad": 0.02,
    "figure.constrained_layout.w_pad": 0.02,
}
PNG_DPI = 300


@dataclass(frozen=True)
class Style:
    """Looks for the names of one figure: built from the table and the names the figure shows, so
    unknown names get distinct spares."""

    table: Mapping[str, Mapping[str, Entry]]
    names: Mapping[str, tuple[str, ...]]

    def entry(self, kind: Kind, name: str) -> Entry:
        known = self.table.get(kind, {})
        if name in known:
            return known[name]
        unknown = sorted(n for n in self.names.get(kind, ()) if n not in known)
        i = unknown.index(name) if name in unknown else len(unknown)
        spare_c = SPARE_COLOURS.get(kind) or [GREY]
        return Entry(label=name, order=len(known) + i, colour=spare_c[i % len(spare_c)],
                     marker=SPARE_MARKERS[i % len(SPARE_MARKERS)], hatch=SPARE_HATCHES[i % len(SPARE_HATCHES)],
                     linestyle=SPARE_LINESTYLES[i % len(SPARE_LINESTYLES)])  # type: ignore[arg-type]

    def colour(self, kind: Kind, name: str) -> str:
        return self.entry(kind, name).colour

    def label(self, kind: Kind, name: str) -> str:
        return self.entry(kind, name).label

    def sort(self, kind: Kind, names: list[str]) -> list[str]:
        return sorted(dict.fromkeys(names), key=lambda n: (self.entry(kind, n).order, n))


def style_for(table: Mapping[str, Mapping[str, Entry]] | None = None, **names: list[str]) -> Style:
    """A Style for a figure showing these names per kind, e.g. style_for(cc=[...], path=[...])."""
    return Style(table if table is not None else STYLE_TABLE, {k: tuple(v) for k, v in names.items()})


def order_key(kind: Kind, name: str) -> tuple[int, str]:
    """Sort key by the table's order; unknown names after the known ones, by name."""
    e = STYLE_TABLE.get(kind, {}).get(name)
    return (e.order if e else len(STYLE_TABLE.get(kind, {})), name)
