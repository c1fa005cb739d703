"""Every numeric figure of summary.json is listed (mpvlab/results/figures.py, issue 43): with the
registry's checks that compare it with independent raw evidence, or `no check:` and why."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from mpvlab.results import checks, figures


def test_every_figure_of_the_model_has_a_row() -> None:
    figs = figures.figures()
    assert len(figs) > 200 and "paths.KEY.rx_bytes" in figs and "rtp.latency_ms.p50" in figs
    assert [p for p in figs if figures.row_of(p) is None] == []


def test_every_row_names_registry_checks_or_says_why_not_and_matches_a_figure() -> None:
    names = {c.name for c in checks.CHECKS}
    figs = figures.figures()
    for f in figures.FIGURES:
        assert set(f.checks) <= names, f.pattern
        assert f.checks or f.note.startswith("no check: "), f.pattern
        assert not f.checks or not f.note.startswith("no check"), f.pattern
        assert any(figures.row_of(p) is f for p in figs), f"{f.pattern} matches no figure (or an earlier row takes them)"


def test_a_figure_added_to_the_model_without_a_row_fails(monkeypatch: Any) -> None:
    """The walk finds a new numeric field wherever the model grows one, and the table refuses it."""
    from mpvlab.results import summary

    class Grown(BaseModel):
        brand_new_figure_bps: float | None = None
    monkeypatch.setattr(summary, "Summary", Grown)
    assert figures.figures() == {"brand_new_figure_bps": "float"}
    with pytest.raises(ValueError, match="brand_new_figure_bps has no row"):
        figures.table()


def test_the_page_lists_every_figure() -> None:
    page = checks.table_page()
    for p in figures.figures():
        assert f"| `{p}` |" in page, p
    assert "| `dash.quality_avg` | float | — | no check: mean quality level" in page
