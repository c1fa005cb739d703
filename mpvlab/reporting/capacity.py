"""The capacity a run's paths were configured with, per time bin, for figures that show it beside
the achieved throughput (`mpvlab plot`, the report's throughput over time)."""

from __future__ import annotations

from pathlib import Path


from mpvlab.core.errors import InputError
from mpvlab.links.capacity import capacity_series
from mpvlab.input.files import load_result_json, load_result_yaml
from mpvlab.input.scenario import parse_scenario


def configured_capacity(run_dir: Path, bin_s: float, end_s: float) -> dict[str, list[tuple[float, float]]]:
    """Per path: the downlink's configured capacity per plot bin (tbf rate, rate schedule or trace,
    outages at 0), from the run's resolved scenario; paths without a rate limit are left out."""
    try:
        # within the limits of every other result file (a results folder is untrusted input, issue 45)
        sc = parse_scenario(load_result_yaml(run_dir / "resolved.yaml"), str(run_dir / "resolved.yaml"))
        base = Path(load_result_json(run_dir / "provenance.json")["scenario_file"]).parent
    except (OSError, ValueError, KeyError, TypeError, InputError):   # a decoration: never fatal
        return {}
    out: dict[str, list[tuple[float, float]]] = {}
    bin_ns, end_ns = int(bin_s * 1e9), int(end_s * 1e9)
    for name, spec in sc.paths.items():
        d = spec.down
        try:
            if d.capacity is not None:
                out[name] = capacity_series(d.capacity, d.outages, base, bin_ns, end_ns)
            elif d.rate is not None:
                cut = [(a, b) for a, b in d.outages]
                out[name] = [((t + bin_s / 2), d.rate * (1 - sum(max(0.0, min(t + bin_s, b / 1e9) - max(t, a / 1e9))
                                                                  for a, b in cut) / bin_s))
                             for t in (k * bin_s for k in range(int(end_s / bin_s)))]
        except (OSError, ValueError, InputError):
            continue      # a trace no longer where the run found it: the figure goes without the line
    return out
