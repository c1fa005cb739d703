"""The report's figure formats (`mpvlab report --formats`, `--png-dpi`; mpvlab/reporting/output.py):
PNG written only when asked, at the resolution asked; the page links exactly the files written and
states the formats; a bad choice is an error naming the option and what is allowed, before anything
is written (or, for a sweep, before any run); the constrained layout runs once per figure whatever
the formats (issue 36). The default (SVG + PDF, no PNG) is checked in tests/test_report.py."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.layout_engine import ConstrainedLayoutEngine

import mpvlab
from mpvlab.cli import main
from mpvlab.core.errors import InputError
from mpvlab.reporting import build_report, style
from mpvlab.reporting.figure import render
from mpvlab.reporting.output import Output, output_choice
from mpvlab.reporting.synthetic import make_set
from mpvlab.core.paths import checkout_root

REPO = checkout_root()


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    w, h = struct.unpack(">II", data[16:24])
    return w, h


def test_png_when_asked_at_its_dpi_and_the_page_links_it(tmp_path: Path) -> None:
    make_set(tmp_path / "src", ["sc-a"], ["cubic"], ["default"], trials=2, series_s=4)
    rep = build_report(tmp_path / "src", tmp_path / "out", output=output_choice("svg,pdf,png", 100))
    figdir = tmp_path / "out" / "figures"
    svgs = sorted(p.stem for p in figdir.glob("*.svg"))
    assert svgs and sorted(p.stem for p in figdir.glob("*.png")) == svgs == sorted(p.stem for p in figdir.glob("*.pdf"))
    # the PNG's pixels are the figure's size in inches × the dpi asked (a figure is a column or the text wide)
    for p in figdir.glob("*.png"):
        w, _ = _png_size(p.read_bytes())
        assert min(abs(w - round(inches * 100)) for inches in (style.COLUMN_W, style.FULL_W)) <= 1, (p.name, w)
    page = rep.html.read_text()
    hrefs = [h for h in re.findall(r'href="([^"]*)"', page) if h.startswith("figures/") and not h.endswith(".csv")]
    assert sorted(hrefs) == sorted(f"figures/{s}.{x}" for s in svgs for x in ("svg", "pdf", "png"))
    assert page.count(">PNG (100 dpi)</a>") == len(svgs)
    assert "under <code>figures/</code>: SVG, PDF, PNG (100 dpi)\n" in page
    assert rep.output == Output(("svg", "pdf", "png"), 100)


@pytest.mark.parametrize("formats,dpi,says", [
    ("svg,jpg", 300, "--formats: 'jpg' is not a figure format; allowed: a comma list of svg, pdf, png holding svg"),
    (" , ", 300, "--formats: empty; allowed: a comma list of svg, pdf, png holding svg"),
    ("pdf,png", 300, "--formats: pdf,png lacks svg"),
    ("svg,png", 71, "--png-dpi: 71: allowed a whole number of dots per inch, 72..600"),
    ("svg,png", 601, "--png-dpi: 601: allowed"),
    ("svg", True, "--png-dpi: True: allowed"),
])
def test_a_bad_choice_names_the_option_and_what_is_allowed(formats: str, dpi: int, says: str) -> None:
    with pytest.raises(InputError) as e:
        output_choice(formats, dpi)
    assert says in str(e.value)


def test_a_choice_is_normalised() -> None:
    assert output_choice(" PNG, svg,png ", 72) == Output(("svg", "png"), 72)
    assert output_choice(["png", "svg"], 600) == Output(("svg", "png"), 600)
    assert output_choice() == Output(("svg", "pdf"), 300)


def test_command_line_and_api_refuse_a_bad_choice_before_writing(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    make_set(tmp_path / "src", ["sc-a"], ["cubic"], ["default"], trials=1, series_s=0)
    assert main(["report", str(tmp_path / "src"), "--formats", "svg,gif"]) == 2
    assert main(["report", str(tmp_path / "src"), "--formats", "svg,png", "--png-dpi", "1200"]) == 2
    err = capsys.readouterr().out
    assert "--formats: 'gif' is not a figure format" in err and "--png-dpi: 1200: allowed" in err
    assert not (tmp_path / "src" / "report").exists()
    with pytest.raises(InputError, match=r"mpvlab.report: formats: pdf lacks svg"):
        mpvlab.report(tmp_path / "src", formats="pdf")
    assert not (tmp_path / "src" / "report").exists()
    # a sweep checks its report's formats before its first run (--dry-run: it could not start one anyway)
    assert main(["sweep", str(REPO / "sweeps" / "rtp-competition.yaml"), "--quick", "--dry-run",
                 "--results", str(tmp_path / "res"), "--formats", "svg,tiff"]) == 2
    assert "--formats: 'tiff' is not a figure format" in capsys.readouterr().out


def test_a_png_dpi_without_png_is_an_error_naming_both_options(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # it would change nothing: the reader most likely meant a PNG (issue 36: it was silently ignored)
    with pytest.raises(InputError) as e:
        output_choice("svg,pdf", 150)
    assert str(e.value).startswith("--png-dpi: 150 given, but --formats (svg,pdf) has no png")
    assert output_choice("svg,pdf") == Output(("svg", "pdf"), 300)       # not given: no error
    make_set(tmp_path / "src", ["sc-a"], ["cubic"], ["default"], trials=1, series_s=0)
    assert main(["report", str(tmp_path / "src"), "--png-dpi", "150"]) == 2
    assert "--png-dpi: 150 given, but --formats (svg,pdf) has no png" in capsys.readouterr().out
    assert not (tmp_path / "src" / "report").exists()
    with pytest.raises(InputError, match=r"mpvlab.report: png_dpi: 150 given, but mpvlab.report: formats \(svg\) "
                                         r"has no png"):
        mpvlab.report(tmp_path / "src", formats="svg", png_dpi=150)
    assert not (tmp_path / "src" / "report").exists()
    spec = REPO / "sweeps" / "rtp-competition.yaml"
    assert main(["sweep", str(spec), "--quick", "--dry-run", "--results", str(tmp_path / "res"),
                 "--png-dpi", "150"]) == 2
    assert "--png-dpi: 150 given, but --formats (svg,pdf) has no png" in capsys.readouterr().out
    with pytest.raises(InputError, match=r"mpvlab.sweep: png_dpi: 150 given, but mpvlab.sweep: formats"):
        mpvlab.sweep(spec, tmp_path / "res", quick=True, png_dpi=150)     # before its first run (and root)
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("formats", [("svg", "pdf"), ("svg",), ("svg", "pdf", "png")])
def test_the_layout_runs_once_whatever_the_formats(formats: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = ConstrainedLayoutEngine.execute

    def counted(self: ConstrainedLayoutEngine, fig: plt.Figure) -> object:
        calls.append(fig)
        return real(self, fig)
    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", counted)
    fig, axes = plt.subplots(2, 1, layout="constrained", figsize=(3, 2))
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a line")
    fig.legend(loc="outside upper right")
    data = render(fig, Output(formats, 72))
    assert set(data) == set(formats)
    assert len(calls) == 1
