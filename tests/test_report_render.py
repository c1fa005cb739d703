"""Figures built and rendered in the report's worker processes (mpvlab/reporting/workers.py) are the same bytes as figures built and rendered one after another in this process: PNG
and PDF byte for byte (both are byte-stable: no dates in the metadata, issue 36), SVG as the same
drawing (matplotlib gives each SVG element a random id, so two renderings of one figure never match
byte for byte)."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from mpvlab.reporting import figures as F
from mpvlab.reporting.workers import build_all
from mpvlab.reporting.output import Output
from mpvlab.reporting.synthetic import make_set
from mpvlab.results.aggregate import Collection, aggregate


def _svg_without_ids(data: bytes) -> str:
    text = re.sub(r'(id|xlink:href|clip-path)="[^"]*"', "", data.decode())
    return re.sub(r"url\(#[^)]*\)", "url()", text)      # hatch patterns are referenced by random id too


@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 1.06–1.29 cores in S6–S8 (the figure worker pool): beside two light tests it would ask more than two CPUs (S8)
def test_parallel_build_and_render_gives_the_serial_bytes(tmp_path: Path) -> None:
    """All three formats (PNG at 100 dpi too), made by a forked worker and the report's process, against
    every figure made in this process alone."""
    make_set(tmp_path, ["sc-a"], ["cubic", "bbr"], ["minrtt"], trials=2, series_s=4)
    c = aggregate(tmp_path)
    output = Output(("svg", "pdf", "png"), 100)
    serial = [f for _, figs in build_all(c, output=output, workers=1) for f in figs]
    parallel = [f for _, figs in build_all(aggregate(tmp_path), output=output, workers=2) for f in figs]
    assert [f.id for f in serial] == [f.id for f in parallel] and len(parallel) > 2
    for s, p in zip(serial, parallel):
        assert set(p.data) == {"png", "pdf", "svg"}
        assert p.mpl is None and p.png_dpi == 100
        assert p.data["png"][:8] == b"\x89PNG\r\n\x1a\n" and p.data["pdf"][:5] == b"%PDF-"
        assert p.data["png"] == s.data["png"], s.id
        assert p.data["pdf"] == s.data["pdf"], s.id
        assert _svg_without_ids(p.data["svg"]) == _svg_without_ids(s.data["svg"]), s.id


def test_parts_give_the_whole_builders_figures(tmp_path: Path) -> None:
    """A builder split in parts (figures.Parts: one worker task per part) gives the figures the whole
    builder gives: same ids in the same order, captions, data tables, and PDF bytes."""
    from mpvlab.reporting import bbr_figures
    make_set(tmp_path, ["sc-a", "sc-b"], ["cubic", "bbr"], ["default"], trials=2, series_s=4)
    c = aggregate(tmp_path)
    wholes = {"Congestion window over time": lambda: F.timeseries_figures(c, "cwnd"),
              "BBR's model over time (BBR-family CCs)": lambda: bbr_figures.figures(c),
              "QoE and path switches per congestion control": lambda: [
                  f for m, t, y in F.bar_metrics() if (f := F.bar_figure(c, m, t, y)) is not None]}
    builders = dict(F.BUILDERS)
    for section, whole in wholes.items():
        builder = builders[section]
        assert isinstance(builder, F.Parts) and len(builder.parts(c)) > 1, section
        a, b = whole(), builder(c)
        assert [f.id for f in a] == [f.id for f in b] and len(a) > 1, section
        assert [(f.caption, f.tables) for f in a] == [(f.caption, f.tables) for f in b], section
        assert a[-1].rendered()["pdf"] == b[-1].rendered()["pdf"], section
        plt.close("all")           # the figures not rendered are still open


def test_a_builder_failing_in_a_worker_fails_the_report_and_leaves_nothing(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The error of a figure built in a worker reaches the report's caller (not a report with a figure
    missing), and the half-built report folder is removed."""
    from mpvlab.reporting import build_report

    def broken(c: Collection) -> list[F.Figure]:
        raise ValueError("a builder that fails")
    monkeypatch.setattr(F, "BUILDERS", [*F.BUILDERS, ("broken", broken)])    # the workers fork with it
    make_set(tmp_path / "src", ["sc-a"], ["cubic"], ["default"], trials=2, series_s=0)
    with pytest.raises(ValueError, match="a builder that fails"):
        build_report(tmp_path / "src", tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


@pytest.mark.parametrize("formats", [("svg", "pdf"), ("svg",)])
def test_the_first_vector_file_is_what_savefig_writes(tmp_path: Path, formats: tuple[str, ...]) -> None:
    """figure.render prints the first vector file with its format's canvas (the constrained layout in
    its one draw, issue 36): the bytes are savefig's — which draws the figure once more to run the
    layout — PDF byte for byte, SVG up to its random ids; the files after it too."""
    import io

    import matplotlib

    from mpvlab.reporting import pdf_fonts, style
    from mpvlab.reporting.figure import render
    make_set(tmp_path, ["sc-a"], ["cubic", "bbr"], ["minrtt"], trials=2, series_s=4)
    c = aggregate(tmp_path)
    for build in (lambda: F._bars(c)[0], lambda: F.timeseries_figures(c, "throughput")[0]):
        ours = render(build().mpl, Output(formats))
        fig = build().mpl
        assert fig.get_layout_engine() is not None          # the case the canvas print is for
        theirs = {}
        with matplotlib.rc_context(style.RC), pdf_fonts.subset_once():
            for fmt in ("pdf", "svg"):
                if fmt in formats:
                    buf = io.BytesIO()
                    fig.savefig(buf, format=fmt, metadata={"CreationDate": None} if fmt == "pdf" else {"Date": None})
                    theirs[fmt] = buf.getvalue()
                    fig.set_layout_engine(None)
        plt.close(fig)
        assert set(ours) == set(theirs) == set(formats)
        if "pdf" in formats:
            assert ours["pdf"] == theirs["pdf"]
        assert _svg_without_ids(ours["svg"]) == _svg_without_ids(theirs["svg"])
