"""One self-contained HTML file: inline CSS, figures as base64 PNG, no script, no external reference
— it opens from disk (or an e-mail attachment) without a server."""

from __future__ import annotations

import base64
import html
import math
import time
from collections import Counter
from typing import Any

import jinja2

from mpvlab.report.aggregate import Collection, Config
from mpvlab.report.figures import Figure
from mpvlab.report.hosts import by_host, host_kind, mixed_configs

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
generated {{ generated }} by <code>mpvlab report</code>.</p>

<div class="flags">
{% for f in flags %}<div class="flag {{ f.cls }}">{{ f.text }}</div>
{% endfor %}</div>

<h2>Method</h2>
<p>A <b>configuration</b> is scenario × congestion control × scheduler × every other scenario field that differs
between the runs of that scenario (from each run's <code>resolved.yaml</code>; seeds never define one); its runs are
its trials. Only runs whose <code>status.json</code> says <code>complete</code> are aggregated. Per configuration and
metric: <b>n</b> trials with a value, <b>mean</b>, <b>median</b>, and a <b>{{ conf_pct }} % confidence interval
of the mean from Student's t distribution</b>: mean ± t<sub>{{ t_level }}, n−1</sub> · s / √n, s the sample
standard deviation (n − 1 in the denominator); no interval for n = 1. Tables below show mean [CI low, CI high].
Full tables: {% for t in tables %}<code>{{ t }}</code>{% if not loop.last %}, {% endif %}{% endfor %}
(next to this file).</p>

<h2>Summary per configuration</h2>
<table>
<tr><th class="l">configuration</th><th>n</th>{% for h in summary_heads %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in summary_rows %}<tr><td class="l">{% if row.colour %}<span class="swatch" style="background: {{ row.colour }}"></span> {% endif %}{{ row.label }}</td><td>{{ row.n }}</td>
{% for cell in row.cells %}<td>{{ cell|safe }}</td>{% endfor %}</tr>
{% endfor %}</table>

{% for section, figs in figure_sections %}
<h2>{{ section }}</h2>
{% for f in figs %}<figure id="{{ f.id }}"><img alt="{{ f.title }}" src="data:image/png;base64,{{ f.b64 }}">
<figcaption>{{ f.caption }}</figcaption></figure>
{% endfor %}{% endfor %}

<h2>Runs flagged</h2>
{% if warned %}<p>Complete runs with fidelity warnings or failed cross-checks (aggregated, but check them):</p>
<table><tr><th class="l">run</th><th class="l">configuration</th><th class="l">warnings</th></tr>
{% for w in warned %}<tr><td class="l"><code>{{ w.rel }}</code></td><td class="l">{{ w.config }}</td>
<td class="l">{% for m in w.warnings %}{{ m }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>{% else %}<p class="muted">No complete run has fidelity warnings or failed cross-checks.</p>{% endif %}
{% if failed %}<p>Runs <b>not aggregated</b> (failed, interrupted or incomplete):</p>
<table><tr><th class="l">run</th><th class="l">state</th><th class="l">reason</th></tr>
{% for b in failed %}<tr><td class="l"><code>{{ b.rel }}</code></td><td class="l">{{ b.state }}</td>
<td class="l">{{ b.reason }}</td></tr>{% endfor %}</table>{% else %}<p class="muted">No failed or incomplete runs.</p>{% endif %}

<h2>Provenance</h2>
<table>
{% for k, vals in prov_rows %}<tr><th class="l">{{ k }}</th><td class="l">{% for v, n in vals %}{{ v }}
<span class="muted">({{ n }} run{{ 's' if n != 1 else '' }})</span>{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>
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

SUMMARY_METRICS = [("underflows", "underflows"), ("picture_discards", "picture discards"),
                   ("path_switches", "path switches"), ("startup_delay_s", "startup delay (s)"),
                   ("underflow_total_s", "underflow time (s)"), ("stall_ratio", "stall ratio")]
DASH_METRICS = [("dash.quality_avg", "DASH quality level"), ("dash.stall_rate", "DASH stall rate"),
                ("dash.bitrate_switches", "DASH switches")]


def fmt(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if abs(v) >= 1000 or float(v).is_integer():
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.0f}"
    return f"{v:.{digits}g}"


def cell(cfg: Config, metric: str) -> str:
    s = cfg.stats.get(metric)
    if s is None or s.n == 0:
        return "–"
    text = html.escape(fmt(s.mean))
    if s.n >= 2:
        text += f' <span class="ci">[{html.escape(fmt(s.ci_low))}, {html.escape(fmt(s.ci_high))}]</span>'
    if s.n >= 3 or (s.n == 2 and s.median != s.mean):
        text += f'<br><span class="ci">median {html.escape(fmt(s.median))}</span>'
    return text


def _counted(values: list[Any]) -> list[tuple[str, int]]:
    return Counter(str(v) for v in values).most_common()


def render(c: Collection, figure_sections: list[tuple[str, list[Figure]]], tables: list[str],
           title: str) -> str:
    from mpvlab.report.figures import cc_colour
    paths = list(dict.fromkeys(p for r in c.runs for p in r.paths))
    share_metrics = [(f"paths.{p}.share", f"{p} share") for p in paths]
    tput_metrics = [(f"paths.{p}.mean_throughput_bps", f"{p} Mbit/s") for p in paths]
    ccs = sorted({cfg.cc for cfg in c.configs})
    dash_metrics = [(m, h) for m, h in DASH_METRICS
                    if any(cfg.stats.get(m) is not None and cfg.stats[m].n for cfg in c.configs)]
    summary_metrics = SUMMARY_METRICS + dash_metrics + share_metrics
    summary_rows = []
    for cfg in c.configs:
        cells = [cell(cfg, m) for m, _ in summary_metrics]
        for m, _ in tput_metrics:
            s = cfg.stats.get(m)
            cells.append("–" if s is None or s.n == 0 else
                         html.escape(f"{s.mean / 1e6:.3g}") + (f' <span class="ci">± {s.ci_half / 1e6:.2g}</span>'
                                                                if s.n >= 2 else ""))
        summary_rows.append({"label": cfg.label, "n": len(cfg.runs), "cells": cells,
                             "colour": cc_colour(cfg.cc, ccs)})
    warned = [{"rel": r.rel, "config": next(cfg.label for cfg in c.configs if cfg.key == r.config),
               "warnings": r.warnings} for r in c.runs if r.warnings]
    flags = []
    if c.not_aggregated:
        states = Counter(b.state for b in c.not_aggregated)
        flags.append({"cls": "bad", "text": f"{len(c.not_aggregated)} run(s) not aggregated: "
                      + ", ".join(f"{n} {s}" for s, n in states.most_common()) + " — listed under Runs flagged."})
    if warned:
        flags.append({"cls": "warn", "text": f"{len(warned)} of {len(c.runs)} complete run(s) have fidelity warnings "
                      "or failed cross-checks — listed under Runs flagged."})
    kernels = _counted([(r.provenance.get("host") or {}).get("kernel") for r in c.runs])
    commits = _counted([_commit(r.provenance) for r in c.runs])
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
    run_metrics = [("underflows", "underflows"), ("picture_discards", "discards"),
                   ("picture_discards_no_underflow", "of which CPU-late"), ("path_switches", "switches"),
                   ("startup_delay_s", "startup (s)")] + [(f"paths.{p}.share", f"{p} share") for p in paths] + [
                   ("host_steal_during_playback.fraction", "host steal")]
    run_rows = []
    for cfg in c.configs:
        for r in cfg.runs:
            fid = r.summary.get("fidelity_ok")
            run_rows.append({"config": cfg.label, "trial": (r.sweep or {}).get("trial", "–"),
                             "seed": r.summary.get("seed", "–"), "rel": r.rel,
                             "vals": [fmt(r.metrics.get(m)) for m, _ in run_metrics],
                             "fid": {True: "ok", False: "WARN", None: "–"}.get(fid, str(fid))})
    sections = [(name, [{"id": f.id, "title": f.title, "caption": f.caption,
                         "b64": base64.b64encode(f.png).decode("ascii")} for f in figs])
                for name, figs in figure_sections]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(TEMPLATE).render(
        title=title, source=str(c.source), generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        n_complete=len(c.runs), configs=c.configs, flags=flags, conf_pct=round(c.confidence * 100),
        t_level=f"{0.5 + c.confidence / 2:.3g}", tables=tables,
        summary_heads=[h for _, h in summary_metrics + tput_metrics], summary_rows=summary_rows,
        figure_sections=sections, warned=warned, failed=c.not_aggregated, prov_rows=prov_rows, pkg_rows=pkg_rows,
        run_heads=[h for _, h in run_metrics], run_rows=run_rows)


def _commit(prov: dict[str, Any]) -> str:
    g = prov.get("git") or {}
    c = g.get("commit")
    if not c:
        return "unknown"
    return f"{str(c)[:12]}{' (dirty)' if g.get('dirty') else ''}"
