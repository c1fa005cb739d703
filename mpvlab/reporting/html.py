"""One self-contained HTML file: inline CSS, figures inline, no script, no external reference — it
opens from disk (or an e-mail attachment) without a server.

Figures: each is embedded as its SVG file (data: URI in an <img>, so figures cannot clash over SVG
element ids and no markup from a figure runs in the page); vector, so it stays sharp at any zoom,
and the same bytes as figures/<name>.svg. Under each figure, relative links to the files the report
wrote for it (SVG, PDF, and PNG with its dpi when asked: output.Output; they work when the report
folder is kept together; the page itself needs none of them). The formats written are stated under
Provenance."""

from __future__ import annotations

import base64
import html
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from mpvlab.results import metrics
from mpvlab.results.aggregate import Collection, Config
from mpvlab.reporting import bbr, style
from mpvlab.reporting.figure import Figure
from mpvlab.reporting.output import Output
from mpvlab.reporting.numbers import fmt, fmt_p
from mpvlab.reporting.hosts import by_host, host_kind, mixed_configs
from mpvlab.results.stats import ALPHA, N_RESAMPLES

TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mpvlab report — {{ title }}</title>
<style>
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1200px; padding: 1.2em 2em 3em; color: #1d1d1f; line-height: 1.4; font-size: 14px; }
h1 { font-size: 1.6em; margin-bottom: 0.1em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2em; } h3 { font-size: 1.05em; }
.sub { color: #555; margin-top: 0; }
.flags { margin: 1em 0; } .flag { padding: 0.45em 0.8em; border-radius: 4px; margin: 0.3em 0; }
.ok { background: #e8f5e9; border-left: 4px solid #2e7d32; }
.warn { background: #fff8e1; border-left: 4px solid #f9a825; }
.bad { background: #ffebee; border-left: 4px solid #c62828; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 12.5px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
tr:nth-child(even) td { background: #fafafa; }
.ci { color: #666; font-size: 0.92em; } .muted { color: #777; }
figure { margin: 1em 0 1.6em; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.92em; max-width: 900px; }
code { background: #f4f4f4; padding: 0 3px; border-radius: 3px; }
details { margin: 0.5em 0; } summary { cursor: pointer; font-weight: 600; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #333; vertical-align: -1px; }
</style></head><body>
<h1>mpvlab report — {{ title }}</h1>
<p class="sub">{{ n_complete }} complete run(s) in {{ configs|length }} configuration(s) from <code>{{ source }}</code>;
generated {{ generated }} by <code>mpvlab report</code>. Results first; the <a href="#method">method</a> and the
<a href="#metrics">definition of every metric</a> follow them.</p>

<div class="flags">
{% for f in flags %}<div class="flag {{ f.cls }}">{{ f.text }}</div>
{% endfor %}</div>

<h2>Summary per configuration</h2>
<table>
<tr><th class="l">configuration</th><th>n</th>{% for h in summary_heads %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in summary_rows %}<tr><td class="l">{% if row.colour %}<span class="swatch" style="background: {{ row.colour }}"></span> {% endif %}{{ row.label }}</td><td>{{ row.n }}</td>
{% for cell in row.cells %}<td>{{ cell|safe }}</td>{% endfor %}</tr>
{% endfor %}</table>

{% if bbr_rows %}<h2>BBR's model per configuration</h2>
<p>Over the flows that carried the workload's bytes (Apache's access log per connection, else the flow's acknowledged
bytes), from their first request to their last byte (window <i>active</i>): an idle connection on the workload's port
(a browser's preconnect or page connection), the fidelity probe, loopback check and preflight request are left out;
the <i>flows</i> column says which flows were in and out, with what they carried and their bytes. The CC's bandwidth
estimate (time-weighted) over the configured link rate, its min RTT, and the share of time per mode; mean over trials
[{{ conf_pct }} % BCa bootstrap interval]. Tables <code>bbr_model.csv</code>; <code>bbr_flows.csv</code> holds every
flow's own mode shares over the active window and the whole run.</p>
<table><tr><th class="l">configuration</th><th>n</th>{% for h in bbr_heads %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in bbr_rows %}<tr><td class="l">{{ row.label }}</td><td>{{ row.n }}</td>
{% for v in row.cells %}<td>{{ v }}</td>{% endfor %}</tr>
{% endfor %}</table>{% endif %}

{% for section, figs in figure_sections %}
<h2>{{ section }}</h2>
{% for f in figs %}<figure id="{{ f.id }}"><img alt="{{ f.title }}" src="data:image/svg+xml;base64,{{ f.b64 }}">
<figcaption>{{ f.caption }}{% if f.links %} <span class="muted">Files:
{% for fmt, href in f.links %}<a href="{{ href }}">{{ fmt }}</a>{% if not loop.last %} · {% endif %}{% endfor %}</span>{% endif %}</figcaption></figure>
{% endfor %}{% endfor %}

<h2>Pairwise comparisons</h2>
{% if pairwise_groups %}<p>Per scenario and QoE metric: pairs tested, pairs different at α = {{ alpha }} after Holm, and the
smallest Holm-adjusted p. {{ pairwise_note }}</p>
{% for g in pairwise_groups %}<h3>{{ g.name }}</h3>
<table><tr><th class="l">metric</th><th class="l">test</th><th>pairs</th><th>different</th><th>min p (Holm)</th>
<th class="l">different pairs (mean a → mean b)</th></tr>
{% for m in g.metrics %}<tr><td class="l">{{ m.label }}</td><td class="l">{{ m.test }}</td><td>{{ m.pairs }}</td>
<td>{{ m.n_sig }}</td><td>{{ m.min_p }}</td><td class="l">{% for d in m.sig %}{{ d }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>
<details><summary>All {{ g.rows|length }} comparisons</summary><table>
<tr><th class="l">metric</th><th class="l">a</th><th class="l">b</th><th>n</th><th>mean a</th><th>mean b</th>
<th>b − a</th><th class="l">test</th><th>statistic</th><th>p</th><th>p (Holm)</th></tr>
{% for r in g.rows %}<tr><td class="l">{{ r.label }}</td><td class="l">{{ r.a }}</td><td class="l">{{ r.b }}</td>
<td>{{ r.n }}</td><td>{{ r.mean_a }}</td><td>{{ r.mean_b }}</td><td>{{ r.diff }}</td><td class="l">{{ r.test }}</td>
<td>{{ r.stat }}</td><td>{{ r.p }}</td><td>{% if r.sig %}<b>{{ r.p_holm }}</b>{% else %}{{ r.p_holm }}{% endif %}</td></tr>
{% endfor %}</table></details>
{% endfor %}{% else %}<p class="muted">No scenario has two configurations with two or more trials each: nothing to
compare.</p>{% endif %}

<h2 id="method">Method</h2>
<p>A <b>configuration</b> is scenario × congestion control × scheduler × every other scenario field that differs
between the runs of that scenario (from each run's <code>resolved.yaml</code>; seeds never define one); its runs are
its trials. Only runs whose <code>status.json</code> says <code>complete</code> are aggregated. Per configuration and
metric: <b>n</b> trials with a value, <b>mean</b>, <b>median</b>, and a <b>{{ conf_pct }} % confidence interval of the
mean</b> (SciPy {{ scipy_version }}), of one of two kinds, fixed per metric in its definition (below):</p>
<ul>
<li><b>t</b> — Student's t: mean ± t<sub>{{ t_level }}, n−1</sub> · s / √n (s with n − 1), for durations far from
their bound; intersected with the metric's possible range (marked † where that cut it).</li>
<li><b>b</b> — bootstrap, bias-corrected and accelerated (BCa), {{ n_resamples }} resamples of the trials, seeded
per configuration and metric (a rebuilt report gives the same intervals), for counts and ratios, whose few-trial
distributions are skewed and pile up at 0. It lies within the observed values, so within the range. With few trials
(n &lt; 10) bootstrap intervals tend to be too narrow: read them with n. At n = 2 it is exactly the min–max of the
two trials (the means of resamples of two values lie between them).</li>
</ul>
<p>No interval for n = 1. Tables below show mean [low, high]<sup>kind</sup>; <code>stats.csv</code> holds both kinds
for every metric. <b>Pairwise comparisons</b>: within each scenario (same other parameters), every pair of
configurations per QoE metric, two-sided, with the metric's test — <b>Welch's t</b> (unequal variances) for
durations, <b>Mann–Whitney U</b> (exact for small samples without ties) for counts and ratios — and <b>Holm's</b>
step-down correction over the pairs of one metric (family-wise error rate α = {{ alpha }}).
Full tables: {% for t in tables %}<code>{{ t }}</code>{% if not loop.last %}, {% endif %}{% endfor %}
(next to this file).</p>

<h2 id="metrics">Metrics</h2>
<table>
<tr><th class="l">metric</th><th class="l">unit</th><th>range</th><th class="l">better</th><th>interval</th>
<th class="l">test</th><th class="l">definition</th><th class="l">convention</th></tr>
{% for m in metric_rows %}<tr><td class="l">{{ m.label }}<br><code>{{ m.key }}</code></td><td class="l">{{ m.unit }}</td>
<td>{{ m.range }}</td><td class="l">{{ m.direction }}</td><td>{{ m.interval }}</td><td class="l">{{ m.test }}</td>
<td class="l">{{ m.definition }}</td><td class="l">{{ m.source }}</td></tr>
{% endfor %}</table>

<h2>Runs flagged</h2>
{% if warned %}<p>Complete runs with fidelity warnings or failed cross-checks (aggregated, but check them):</p>
<table><tr><th class="l">run</th><th class="l">configuration</th><th class="l">warnings</th></tr>
{% for w in warned %}<tr><td class="l"><code>{{ w.rel }}</code></td><td class="l">{{ w.config }}</td>
<td class="l">{% for m in w.warnings %}{{ m }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>{% else %}<p class="muted">No complete run has fidelity warnings or failed cross-checks.</p>{% endif %}
{% if left_out %}<p>Complete runs <b>left out</b> of every statistic and figure (fidelity_ok false; <code>mpvlab
report --include-warned</code> keeps them), per configuration:</p>
<table><tr><th class="l">configuration</th><th>kept</th><th>left out</th><th class="l">why</th></tr>
{% for label, kept, n, why in left_out %}<tr><td class="l">{{ label }}</td><td>{{ kept }}</td><td>{{ n }}</td>
<td class="l">{% for w in why %}{{ w }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>{% elif include_warned %}<p class="muted">Runs whose fidelity_ok is false are included
(--include-warned).</p>{% endif %}
{% if failed %}<p>Runs <b>not aggregated</b> (failed, interrupted or incomplete):</p>
<table><tr><th class="l">run</th><th class="l">state</th><th class="l">reason</th></tr>
{% for b in failed %}<tr><td class="l"><code>{{ b.rel }}</code></td><td class="l">{{ b.state }}</td>
<td class="l">{{ b.reason }}</td></tr>{% endfor %}</table>{% else %}<p class="muted">No failed or incomplete runs.</p>{% endif %}

<h2>Provenance</h2>
<table>
{% for k, vals in prov_rows %}<tr><th class="l">{{ k }}</th><td class="l">{% for v, n in vals %}{{ v }}
<span class="muted">({{ n }} run{{ 's' if n != 1 else '' }})</span>{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>
{% if figure_files %}<p>Figure files written by this report, under <code>figures/</code>: {{ figure_files }}
(<code>mpvlab report --formats</code>, <code>--png-dpi</code>).</p>{% endif %}
<details><summary>Package versions</summary><table>
<tr><th class="l">package</th><th class="l">version(s)</th></tr>
{% for k, vals in pkg_rows %}<tr><td class="l">{{ k }}</td><td class="l">{% for v, n in vals %}{{ v }}
<span class="muted">({{ n }})</span>{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table></details>

<h2>All runs</h2>
<details><summary>{{ n_complete }} complete run(s)</summary>
<table><tr><th class="l">configuration</th><th>trial</th><th>seed</th><th class="l">run</th>
{% for h in run_heads %}<th>{{ h }}</th>{% endfor %}<th>fidelity</th></tr>
{% for r in run_rows %}<tr><td class="l">{{ r.config }}</td><td>{{ r.trial }}</td><td>{{ r.seed }}</td>
<td class="l"><code>{{ r.rel }}</code></td>{% for v in r.vals %}<td>{{ v }}</td>{% endfor %}<td>{{ r.fid }}</td></tr>
{% endfor %}</table></details>
</body></html>
"""

def cell(cfg: Config, metric: str) -> str:
    s = cfg.stats.get(metric)
    if s is None or s.n == 0:
        return "–"
    text = html.escape(fmt(s.mean))
    if s.n >= 2:
        kind = "b" if s.method.startswith("bootstrap") else "t"
        mark = "†" if s.clipped else ""
        text += (f' <span class="ci">[{html.escape(fmt(s.ci_low))}, {html.escape(fmt(s.ci_high))}]'
                 f'<sup>{kind}{mark}</sup></span>')
    if s.n >= 3 or (s.n == 2 and s.median != s.mean):
        text += f'<br><span class="ci">median {html.escape(fmt(s.median))}</span>'
    return text


def cell_in_units(cfg: Config, metric: str, per: float) -> str:
    """A rate in the view's unit (bit/s per 1e6: Mbit/s): mean ± the interval's half-width."""
    s = cfg.stats.get(metric)
    if s is None or s.n == 0:
        return "–"
    return html.escape(f"{s.mean / per:.3g}") + (f' <span class="ci">± {s.ci_half / per:.2g}</span>'
                                                  if s.n >= 2 else "")


def _counted(values: list[Any]) -> list[tuple[str, int]]:
    return Counter(str(v) for v in values).most_common()


def _metric_rows(c: Collection) -> list[dict[str, str]]:
    present = [k for k, m in c.metric_defs.items() if any(cfg.stats.get(k) and cfg.stats[k].n for cfg in c.configs)]
    keys = sorted(present, key=lambda k: (not c.metric_defs[k].qoe, k.startswith("paths."), present.index(k)))
    out = []
    for k in keys:
        m = c.metric_defs[k]
        out.append({"key": k, "label": m.label, "unit": m.unit, "range": m.range_text,
                    "direction": {"lower": "lower", "higher": "higher", "none": "–"}[m.direction],
                    "interval": "b" if m.interval == "bootstrap" else "t",
                    "test": "Welch's t" if m.test == "welch" else "Mann–Whitney U",
                    "definition": m.definition + (" (clamped to its range)" if m.clamp else ""), "source": m.source})
    return out


def _pairwise_groups(pw: pd.DataFrame | None) -> list[dict[str, Any]]:
    if pw is None or pw.empty:
        return []
    out = []
    for gname, g in pw.groupby("group", sort=False):
        metrics = []
        for _key, gm in g.groupby("metric", sort=False):
            sig = gm[gm.significant]
            valid = gm.p_holm.dropna()
            metrics.append({"label": gm.label.iloc[0], "test": gm.test.iloc[0], "pairs": int(gm.p.notna().sum()),
                            "n_sig": len(sig), "min_p": fmt_p(valid.min()) if len(valid) else "–",
                            "sig": [f"{r['a']} {fmt(r['mean_a'])} → {r['b']} {fmt(r['mean_b'])} (p {fmt_p(r['p_holm'])})"
                                    for r in sig.to_dict("records")]})
        # rows as records: pandas types a named tuple's fields as any scalar, a record's as Any
        rows = [{"label": r["label"], "a": r["a"], "b": r["b"], "n": f"{r['n_a']}/{r['n_b']}", "mean_a": fmt(r["mean_a"]),
                 "mean_b": fmt(r["mean_b"]), "diff": fmt(r["diff_b_minus_a"]), "test": r["test"],
                 "stat": fmt(r["statistic"]), "p": fmt_p(r["p"]), "p_holm": fmt_p(r["p_holm"]),
                 "sig": bool(r["significant"])} for r in g.to_dict("records")]
        out.append({"name": gname, "metrics": metrics, "rows": rows})
    return out


def _pairwise_note(pw: pd.DataFrame | None) -> str:
    """When Mann–Whitney cannot reach α after Holm with these trial counts, say so: 'no difference'
    would otherwise read as evidence of equality."""
    if pw is None or pw.empty:
        return ""
    mw = pw[pw.test.str.startswith("Mann") & pw.p.notna()]
    if mw.empty:
        return ""
    floor = (mw.min_possible_p * mw.family_size).min()
    if floor >= pw.alpha.iloc[0]:
        return (f"Note: with these trial counts the smallest p an exact Mann–Whitney test can give is "
                f"{fmt_p(mw.min_possible_p.min())}; after Holm over the pairs it is ≥ {fmt_p(min(floor, 1.0))}, so no "
                "count or ratio metric can show a difference here — run more trials (or compare fewer "
                "configurations) before reading 0 'different' as 'equal'.")
    return ""


def render(c: Collection, figure_sections: list[tuple[str, list[Figure]]], tables: list[str],
           title: str, pairwise: pd.DataFrame | None = None, html_dir: Path | None = None,
           output: Output | None = None) -> str:
    import scipy

    paths = list(dict.fromkeys(p for r in c.runs for p in r.paths))
    sty = style.style_for(cc=sorted({cfg.cc for cfg in c.configs}))
    # The columns: the metrics whose definition names the summary view (mpvlab/results/summary.py), in its order.
    summary_metrics = [(m, v) for m, v in metrics.view("summary", paths) if not v.only_if_present
                       or any(cfg.stats.get(m) is not None and cfg.stats[m].n for cfg in c.configs)]
    summary_rows = []
    for cfg in c.configs:
        cells = [cell(cfg, m) if v.per == 1.0 else cell_in_units(cfg, m, v.per) for m, v in summary_metrics]
        summary_rows.append({"label": cfg.label, "n": len(cfg.runs), "cells": cells,
                             "colour": sty.colour("cc", cfg.cc)})
    warned = [{"rel": r.rel, "config": next(cfg.label for cfg in c.configs if cfg.key == r.config),
               "warnings": r.warnings} for r in c.runs if r.warnings]
    kernels = _counted([(r.provenance.get("host") or {}).get("kernel") for r in c.runs])
    commits = _counted([_commit(r.provenance) for r in c.runs])
    flags = _flags(c, warned, kernels, commits)
    prov_rows, pkg_rows = _provenance_rows(c, kernels, commits)
    run_metrics = metrics.view("runs", paths)
    run_rows = _run_rows(c, run_metrics)
    def links(f: Figure) -> list[tuple[str, str]]:
        if html_dir is None:
            return []
        # the files written, only: a format the report did not write has no link
        return [(fmt_.upper() + (f" ({f.png_dpi} dpi)" if fmt_ == "png" else ""),
                 os.path.relpath(p, html_dir)) for fmt_, p in f.files.items()]
    sections = [(name, [{"id": f.id, "title": f.title, "caption": f.caption, "links": links(f),
                         "b64": base64.b64encode(f.svg).decode("ascii")} for f in figs])
                for name, figs in figure_sections]
    bbr_heads, bbr_rows = bbr.html_rows(c)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(TEMPLATE).render(
        bbr_heads=bbr_heads, bbr_rows=bbr_rows,
        scipy_version=scipy.__version__, n_resamples=f"{N_RESAMPLES:,}", alpha=ALPHA,
        metric_rows=_metric_rows(c), pairwise_groups=_pairwise_groups(pairwise), pairwise_note=_pairwise_note(pairwise),
        title=title, source=str(c.source), generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        n_complete=len(c.runs), configs=c.configs, flags=flags, conf_pct=round(c.confidence * 100),
        t_level=f"{0.5 + c.confidence / 2:.3g}", tables=tables,
        summary_heads=[v.heading for _, v in summary_metrics], summary_rows=summary_rows,
        figure_sections=sections, figure_files=output.describe() if output is not None else "", warned=warned, failed=c.not_aggregated,
        left_out=[row for row in c.kept_and_left_out() if row[2]], include_warned=c.include_warned, prov_rows=prov_rows, pkg_rows=pkg_rows,
        run_heads=[v.heading for _, v in run_metrics], run_rows=run_rows)


def _flags(c: Collection, warned: list[dict[str, Any]], kernels: list[tuple[str, int]],
           commits: list[tuple[str, int]]) -> list[dict[str, str]]:
    """The report's banner: what a reader must know before trusting a number (runs left out, warnings,
    mixed kernels or code versions, single trials), or that all is well."""
    flags = []
    if c.not_aggregated:
        states = Counter(b.state for b in c.not_aggregated)
        flags.append({"cls": "bad", "text": f"{len(c.not_aggregated)} run(s) not aggregated: "
                      + ", ".join(f"{n} {s}" for s, n in states.most_common()) + " — listed under Runs flagged."})
    if c.left_out:
        flags.append({"cls": "bad", "text": f"{len(c.left_out)} complete run(s) with fidelity_ok false left out of "
                      "every statistic and figure — counted per configuration under Runs flagged "
                      "(--include-warned keeps them)."})
    if warned:
        flags.append({"cls": "warn", "text": f"{len(warned)} of {len(c.runs)} complete run(s) in the statistics have "
                      "fidelity warnings or failed cross-checks — listed under Runs flagged."})
    if len(kernels) > 1 or len(commits) > 1:
        flags.append({"cls": "warn", "text": f"runs come from {len(kernels)} kernel(s) and {len(commits)} "
                      "code version(s) — see Provenance."})
    for label, what, values in mixed_configs(c):     # trials of one configuration from different setups
        flags.append({"cls": "warn", "text": f"configuration {label}: its trials come from different {what} "
                      f"({', '.join(values)}) — compare with care."})
    if any(str(k).endswith("(dirty)") for k, _ in commits):
        flags.append({"cls": "warn", "text": "some runs were made from a checkout with uncommitted changes (dirty)."})
    small = [cfg for cfg in c.configs if len(cfg.runs) < 2]
    if small:
        flags.append({"cls": "warn", "text": f"{len(small)} configuration(s) have a single trial: no confidence "
                      "interval (run more trials for statistics)."})
    if not flags:
        flags.append({"cls": "ok", "text": "All runs complete, no fidelity warnings, one kernel and code version."})
    return flags


def _provenance_rows(c: Collection, kernels: list[tuple[str, int]], commits: list[tuple[str, int]]
                     ) -> tuple[list[tuple[str, list[tuple[str, int]]]], list[tuple[str, list[tuple[str, int]]]]]:
    """The Provenance section: each host and code property with how many runs had each value, and each
    package version likewise."""
    prov_rows = [
        ("kernel", kernels),
        ("OS", _counted([(r.provenance.get("host") or {}).get("os") for r in c.runs])),
        ("host", _counted([(r.provenance.get("host") or {}).get("hostname") for r in c.runs])),
        ("CPUs", _counted([(r.provenance.get("host") or {}).get("cpus") for r in c.runs])),
        ("host kind (nodes)", [(f"{k} ({', '.join(n)})", sum(host_kind(r.provenance) == k for r in c.runs))
                               for k, n in by_host(c.runs).items()]),
        ("mpvlab commit", commits),
        ("sweep", _counted([(r.sweep or {}).get("sweep", "(not from a sweep)") for r in c.runs])),
    ]
    pkgs: dict[str, list[str]] = {}
    for r in c.runs:
        for kind, d in ((r.provenance.get("packages") or {}).items()):
            for name, ver in (d or {}).items():
                pkgs.setdefault(f"{name} ({kind})", []).append(str(ver))
    pkg_rows = [(k, _counted(v)) for k, v in sorted(pkgs.items())]
    return prov_rows, pkg_rows


def _run_rows(c: Collection, run_metrics: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """One row per run in the statistics: its configuration, trial, seed, metrics and fidelity."""
    run_rows = []
    for cfg in c.configs:
        for r in cfg.runs:
            fid = r.summary.get("fidelity_ok")
            run_rows.append({"config": cfg.label, "trial": (r.sweep or {}).get("trial", "–"),
                             "seed": r.summary.get("seed", "–"), "rel": r.rel,
                             "vals": [fmt(r.metrics.get(m)) for m, _ in run_metrics],
                             "fid": {True: "ok", False: "WARN", None: "–"}.get(fid, str(fid))})
    return run_rows


def _commit(prov: dict[str, Any]) -> str:
    g = prov.get("git") or {}
    c = g.get("commit")
    if not c:
        return "unknown"
    return f"{str(c)[:12]}{' (dirty)' if g.get('dirty') else ''}"
