"""Which figure files a report writes (`mpvlab report --formats`, `--png-dpi`; the same options on
`mpvlab sweep` for the report it builds at its end, and on mpvlab.report()): SVG always (report.html
inlines it), PDF by default (vector, Type 42 fonts: what a paper needs), PNG on request (slides,
READMEs) — the dearest format to render (docs/cost.md). No matplotlib here: the command line checks
a choice before a sweep's first run, without loading the plotting stack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from mpvlab.core.errors import InputError
from mpvlab.reporting import style as st

FORMATS = ("svg", "pdf", "png")          # what a report can write, in the order it lists them
DEFAULT_FORMATS = ("svg", "pdf")
PNG_DPI_MIN, PNG_DPI_MAX = 72, 600       # a screen's resolution … twice a printer's; beyond, files of 10s of MB


@dataclass(frozen=True)
class Output:
    """The figure files a report writes: formats (a subset of FORMATS holding "svg") and the PNG's
    resolution (used only when "png" is among them)."""

    formats: tuple[str, ...] = DEFAULT_FORMATS
    png_dpi: int = st.PNG_DPI

    def describe(self) -> str:
        """The formats as the report's page states them, e.g. "SVG, PDF, PNG (300 dpi)"."""
        return ", ".join(f.upper() + (f" ({self.png_dpi} dpi)" if f == "png" else "") for f in self.formats)


def output_choice(formats: str | Sequence[str] = DEFAULT_FORMATS, png_dpi: int | None = None, *,
                  formats_name: str = "--formats", dpi_name: str = "--png-dpi") -> Output:
    """The checked Output for a comma list (or sequence) of formats and a PNG resolution (None: not
    given, the default st.PNG_DPI); an InputError naming the option (`formats_name`, `dpi_name`: the
    caller's spelling) and what is allowed. A resolution given without png among the formats is an
    error naming both options: it would change nothing, and the reader most likely meant a PNG."""
    allowed = "a comma list of " + ", ".join(FORMATS) + " holding svg (report.html inlines each figure's SVG)"
    given = formats.split(",") if isinstance(formats, str) else formats
    if not isinstance(given, (list, tuple)) or not all(isinstance(s, str) for s in given):
        raise InputError(f"{formats_name}: a {type(formats).__name__} given; allowed: {allowed}")
    items = [t for s in given if (t := s.strip().lower())]
    if not items:
        raise InputError(f"{formats_name}: empty; allowed: {allowed}, e.g. svg,pdf,png")
    if bad := [s for s in items if s not in FORMATS]:
        raise InputError(f"{formats_name}: {', '.join(repr(s) for s in bad)} is not a figure format; allowed: "
                         f"{allowed}, e.g. svg,pdf,png")
    if "svg" not in items:
        raise InputError(f"{formats_name}: {','.join(items)} lacks svg; allowed: {allowed}")
    if png_dpi is None:
        return Output(tuple(f for f in FORMATS if f in items), st.PNG_DPI)
    if isinstance(png_dpi, bool) or not isinstance(png_dpi, int) or not PNG_DPI_MIN <= png_dpi <= PNG_DPI_MAX:
        raise InputError(f"{dpi_name}: {png_dpi!r}: allowed a whole number of dots per inch, "
                         f"{PNG_DPI_MIN}..{PNG_DPI_MAX}")
    if "png" not in items:
        raise InputError(f"{dpi_name}: {png_dpi} given, but {formats_name} ({','.join(items)}) has no png: the "
                         f"resolution applies only to PNG figures; add png to {formats_name} (e.g. svg,pdf,png) "
                         f"or leave {dpi_name} out")
    return Output(tuple(f for f in FORMATS if f in items), png_dpi)
