"""Every text of every report figure lies inside its canvas (issue 49 item 7: the y label of the
path-switch bar chart, "path switches per run (scheduler decisions)", was longer than the figure is
tall and was cut at both ends in PNG and SVG). The figures are made by the report's own path
(workers.build_all, in this process); just before each is closed, after its layout ran and its
files were written, every visible text's drawn extent is compared with the figure's bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from mpvlab.reporting import style as st
from mpvlab.reporting.output import Output
from mpvlab.reporting.synthetic import make_set
from mpvlab.reporting.workers import build_all
from mpvlab.results.aggregate import aggregate

TOLERANCE_PX = 1.0


def _outside(fig: Any) -> list[str]:
    renderer = FigureCanvasAgg(fig).get_renderer()
    with matplotlib.rc_context(st.RC):   # the report's style, under which the files were drawn
        fig.draw(renderer)      # the layout engine is off by now: this draws the saved layout
    w, h = fig.bbox.width, fig.bbox.height
    # tick labels exist for ticks outside the view too, but only those the axis draws count
    all_ticks, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in [*axis.majorTicks, *axis.minorTicks]:
                all_ticks.update({id(tick.label1), id(tick.label2)})
            for tick in axis._update_ticks():
                drawn.update({id(tick.label1), id(tick.label2)})
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or (id(t) in all_ticks and id(t) not in drawn):
            continue
        bb = t.get_window_extent(renderer)
        if bb.x0 < -TOLERANCE_PX or bb.y0 < -TOLERANCE_PX or bb.x1 > w + TOLERANCE_PX or bb.y1 > h + TOLERANCE_PX:
            out.append(f"{t.get_text()!r} at x {bb.x0:.0f}..{bb.x1:.0f}, y {bb.y0:.0f}..{bb.y1:.0f} "
                       f"of {w:.0f} x {h:.0f} px")
    return out


@pytest.mark.parametrize("scenarios,ccs,schedulers", [
    (["wifi-lte-a", "wifi-lte-b", "wifi-lte-c"], ["cubic", "bbr"], ["minrtt", "bdp"]),
    (["sc-a"], ["cubic"], ["default"]),
])
def test_every_text_of_every_report_figure_is_inside_its_canvas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 scenarios: list[str], ccs: list[str],
                                                                 schedulers: list[str]) -> None:
    make_set(tmp_path, scenarios, ccs, schedulers, trials=2, series_s=4)
    seen: dict[str, list[str]] = {}
    close = plt.close

    def spy(fig: Any = None) -> None:
        if fig is not None and hasattr(fig, "findobj"):
            label = fig.get_label() or f"figure {len(seen)}"
            seen[f"{label} #{len(seen)}"] = _outside(fig)
        close(fig)

    monkeypatch.setattr(plt, "close", spy)
    built = [f for _, figs in build_all(aggregate(tmp_path), output=Output(("svg", "png"), 100), workers=1)
             for f in figs]
    assert built and len(seen) >= len(built), (len(seen), len(built))
    bad = {k: v for k, v in seen.items() if v}
    assert not bad, f"text outside the canvas: {bad}"
