"""What `mpvlab sweep` shows while it works: counts, an ETA and the phase of every running run."""

from __future__ import annotations

import re
import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from mpvlab.sweeps import Event


class SweepDisplay:
    """Progress of a sweep: done/failed/running counts, an ETA, and the phase of each running run.

    The ETA uses the mean wall time of runs finished in this invocation (an estimate from the video
    length before the first one ends), divided by the number of runs made at once."""

    def __init__(self, console: Console, total: int, parallel: int, estimates: dict[str, float]) -> None:
        self.console, self.total, self.parallel, self.estimates = console, total, parallel, estimates
        self.start = time.monotonic()
        self.running: dict[str, tuple[float, str]] = {}
        self.walls: list[float] = []
        self.counts = {"complete": 0, "failed": 0, "interrupted": 0}
        self.warned = 0          # complete runs with warnings (mpvlab/results/checks.py all_warnings)
        self.left_out = 0        # of which fidelity_ok false: the report leaves them out by default
        self.already = 0
        self.todo = 0
        self._live: Live | None = None

    def live(self) -> Live:
        self._live = Live(self.render(), console=self.console, refresh_per_second=2,
                          transient=not self.console.is_terminal)
        return self._live

    def eta_s(self) -> float:
        done_now = sum(self.counts.values())
        remaining = max(self.todo - done_now - len(self.running), 0)
        per = (sum(self.walls) / len(self.walls)) if self.walls else (
            sum(self.estimates.values()) / max(len(self.estimates), 1))
        in_flight = sum(max(per - (time.monotonic() - t0), 0.0) for t0, _ in self.running.values())
        return (remaining * per + in_flight) / self.parallel

    def render(self) -> Text:
        done = self.already + self.counts["complete"]
        t = Text.assemble(("mpvlab sweep ", "bold"), f"{done}/{self.total} complete, ",
                          (f"{self.counts['failed']} failed", "red" if self.counts["failed"] else ""),
                          (f", {self.warned} with warnings ({self.left_out} fidelity_ok false)",
                           "yellow" if self.warned else ""),
                          f", {len(self.running)} running  [{time.monotonic() - self.start:6.0f} s elapsed, ETA ",
                          (f"{self.eta_s() / 60:.1f} min", "cyan"), "]")
        for key, (t0, phase) in self.running.items():
            t.append(f"\n  {key}  [{time.monotonic() - t0:5.0f} s] ")
            t.append(phase, style="yellow")
        return t

    def event(self, e: Event) -> None:
        if e.kind == "note":
            m = re.match(r"(\d+) to run, (\d+) already complete", e.text)
            if m:
                self.todo, self.already = int(m.group(1)), int(m.group(2))
            self.console.print(e.text)
        elif e.kind == "start":
            self.running[e.key] = (time.monotonic(), "starting")
            if not self.console.is_terminal:
                self.console.print(f"start {e.key} (seed {e.entry['seed'] if e.entry else '?'})")
        elif e.kind == "phase" and e.key in self.running:
            self.running[e.key] = (self.running[e.key][0], e.text)
        elif e.kind == "log":
            self.console.print(Text(f"{e.key}: {e.text}", style="magenta"))
        elif e.kind == "end":
            self._ended(e)
        if self._live is not None:
            self._live.update(self.render())

    def _ended(self, e: Event) -> None:
        t0, _ = self.running.pop(e.key, (time.monotonic(), ""))
        self.counts[e.text] = self.counts.get(e.text, 0) + 1
        if e.text != "interrupted":
            self.walls.append(time.monotonic() - t0)
        entry = e.entry or {}
        style = {"complete": "green", "failed": "red"}.get(e.text, "yellow")
        line = Text.assemble((f"{e.text:11s}", style), f" {e.key}  {time.monotonic() - t0:5.1f} s  "
                             f"{entry.get('run_dir') or ''}")
        if entry.get("reason"):
            line.append(f"\n             {entry['reason']}", style=style)
        if entry.get("warnings"):
            self.warned += 1
            self.left_out += entry.get("fidelity_ok") is False
            line.append(f"\n             {entry['warnings']} warning(s)"
                        f"{', fidelity_ok false: left out of the report' if entry.get('fidelity_ok') is False else ''}"
                        f"; first: {entry.get('first_warning') or ''}", style="yellow")
        elif entry.get("fidelity_ok") is False:
            self.warned += 1
            self.left_out += 1
            line.append("  (fidelity warnings)", style="yellow")
        self.console.print(line)
