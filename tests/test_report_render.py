"""Figures rendered in worker processes (mpvlab/reporting/figure.py render_all) are the same bytes as
figures rendered one after another in this process: PNG and PDF byte for byte (both are byte-stable:
no dates in the metadata, issue 36), SVG as the same drawing (matplotlib gives each SVG element a
random id, so two renderings of one figure never match byte for byte)."""

from __future__ import annotations

import re
from pathlib import Path

from mpvlab.reporting import figures as F
from mpvlab.results.aggregate import aggregate
from mpvlab.reporting.figure import render_all
from mpvlab.reporting.synthetic import make_set


def _svg_without_ids(data: bytes) -> str:
    text = re.sub(r'(id|xlink:href|clip-path)="[^"]*"', "", data.decode())
    return re.sub(r"url\(#[^)]*\)", "url()", text)      # hatch patterns are referenced by random id too


def test_parallel_render_gives_the_serial_bytes(tmp_path: Path) -> None:
    make_set(tmp_path, ["sc-a"], ["cubic", "bbr"], ["minrtt"], trials=2, series_s=4)
    c = aggregate(tmp_path)
    # a bar figure and an over-time one (different artists, layout and a long line in each);
    # built twice: rendering consumes a figure
    def pick() -> list[F.Figure]:
        figs = F._bars(c)[:1] + F.timeseries_figures(c, "throughput")[:1]
        assert len(figs) == 2, [f.id for f in figs]
        return figs
    serial, parallel = pick(), pick()
    for f in serial:
        f.rendered()
    render_all(parallel, workers=2)
    for s, p in zip(serial, parallel):
        assert s.id == p.id
        assert set(p.data) == {"png", "pdf", "svg"}
        assert p.mpl is None                  # the parent's copy is closed, not kept
        assert p.data["png"][:8] == b"\x89PNG\r\n\x1a\n" and p.data["pdf"][:5] == b"%PDF-"
        assert p.data["png"] == s.data["png"], s.id
        assert p.data["pdf"] == s.data["pdf"], s.id
        assert _svg_without_ids(p.data["svg"]) == _svg_without_ids(s.data["svg"]), s.id
