"""The PDF's embedded fonts, subset once per process instead of once per figure (issue 36).

Why this replaces a private matplotlib function: with `pdf.fonttype: 42` (TrueType fonts embedded,
what IEEE/ACM checkers accept; Type 3 is refused) matplotlib subsets DejaVu Sans with fontTools for
every PDF it writes, twice per figure (the characters, then the ligature glyphs "fi"/"fl" its text
shaping makes) — 0.083 CPU-s per subset, ~3 CPU-s of a 1,000-run report's ~17 (docs/cost.md). Which
glyphs go into a subset is decided in `matplotlib.backends._backend_pdf_ps.get_glyphs_subset`, a
private function with no option to change it. Here it is replaced, only while a figure is saved
(`subset_once`), by one that subsets to a fixed superset — printable ASCII, the ligatures and the
symbols the report writes, plus whatever else a figure asks for — so every figure asks for the same
set and the subset is made once per process and reused (the report's workers inherit it by fork:
`prepare` runs before they start). The PDF is the same kind of file as before: Type 0 / CIDFontType2
fonts with the subset embedded (FontFile2), glyphs addressed by id through CIDToGIDMap, a ToUnicode
map; a few KB larger (the superset's glyphs). tests/test_report_pdf_fonts.py checks every glyph a
figure uses is in the embedded font, and its text is recovered from the PDF.

The replacement is installed only if matplotlib still has the function with the signature and
result it was written against (checked on matplotlib 3.11.2, requirements.txt); otherwise the PDF is
written by matplotlib's own path, unchanged, only slower (`available` says which)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
from typing import Any, Iterable, Iterator

# What every report figure's text can hold: printable ASCII, the Latin ligatures matplotlib's text
# shaping substitutes for ASCII letters (DejaVu Sans' "liga": ff, fi, fl, ffi, ffl, U+FB00..FB04), and
# the non-ASCII symbols the report writes (labels, units, method lines).
SUPERSET_CHARS = ("".join(chr(c) for c in range(0x20, 0x7F)) + "".join(chr(c) for c in range(0xFB00, 0xFB05))
                  + "–—·×±−°µ≤≥→…’‘“”Δ")


def _pdf_ps_module() -> Any | None:
    """matplotlib's `_backend_pdf_ps` if it has the function this module replaces, as it was written
    against (fontfile, glyphs) → a context manager of SubsetResults(font, glyph_index_map); else None."""
    try:
        from matplotlib.backends import _backend_pdf_ps as m
    except ImportError:
        return None
    f, results = getattr(m, "get_glyphs_subset", None), getattr(m, "SubsetResults", None)
    if f is None or results is None or getattr(results, "_fields", None) != ("font", "glyph_index_map"):
        return None
    if list(inspect.signature(f).parameters) != ["fontfile", "glyphs"]:
        return None
    return m


def available() -> bool:
    """Whether the subset is made once per process (False: matplotlib's own path, per figure)."""
    return _pdf_ps_module() is not None


class _SubsetFont:
    """The subset as matplotlib's PDF backend uses the fontTools font it is handed: saved to a file
    (`_backend_pdf_ps.font_as_file`) and closed. Holds the bytes, so one subset serves every figure."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def save(self, file: io.BytesIO, reorderTables: bool = False) -> None:  # noqa: N803 — fontTools' name
        file.write(self.data)

    def __enter__(self) -> _SubsetFont:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@functools.lru_cache(maxsize=8)
def _superset_gids(path: str, face_index: int) -> frozenset[int]:
    from fontTools.ttLib import TTFont
    with TTFont(path, fontNumber=face_index, lazy=True) as font:
        cmap = font.getBestCmap() or {}
        order = font.getGlyphOrder()
        index = {name: gid for gid, name in enumerate(order)}
        return frozenset(index[cmap[ord(ch)]] for ch in SUPERSET_CHARS if ord(ch) in cmap)


@functools.lru_cache(maxsize=16)
def _subset(path: str, face_index: int, gids: frozenset[int]) -> tuple[bytes, dict[int, int]]:
    """The font at `path` subset to `gids` by matplotlib's own function (its options), as bytes and
    the map original glyph id → subset glyph id."""
    m = _pdf_ps_module()
    assert m is not None
    from matplotlib.font_manager import FontPath
    original = getattr(m.get_glyphs_subset, "__wrapped_by_mpvlab__", m.get_glyphs_subset)
    with original(FontPath(path, face_index), set(gids)) as sub:
        return m.font_as_file(sub.font).getvalue(), dict(sub.glyph_index_map)


def _glyphs_subset(fontfile: Any, glyphs: Iterable[int]) -> Any:
    """Drop-in for get_glyphs_subset: the cached subset of the superset ∪ the glyphs asked for."""
    m = _pdf_ps_module()
    assert m is not None
    path, face = str(fontfile), getattr(fontfile, "face_index", 0)
    gids = _superset_gids(path, face) | frozenset(int(g) for g in glyphs)
    data, index_map = _subset(path, face, gids)
    return contextlib.nullcontext(m.SubsetResults(_SubsetFont(data), index_map))


@contextlib.contextmanager
def subset_once() -> Iterator[None]:
    """While inside: PDFs written by this process embed the cached superset subset (see above)."""
    m = _pdf_ps_module()
    if m is None:
        yield
        return
    original = m.get_glyphs_subset
    replacement = functools.wraps(original)(_glyphs_subset)
    replacement.__wrapped_by_mpvlab__ = original        # type: ignore[attr-defined]
    m.get_glyphs_subset = replacement
    try:
        yield
    finally:
        m.get_glyphs_subset = original


def prepare(family: str = "DejaVu Sans") -> None:
    """Make the subset of the report's font now, once per process (figure.prepare_workers: before the
    workers fork, or in each worker)."""
    if _pdf_ps_module() is None:
        return
    from matplotlib import font_manager
    fontfile = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
    path, face = str(fontfile), getattr(fontfile, "face_index", 0)
    _subset(path, face, _superset_gids(path, face))
