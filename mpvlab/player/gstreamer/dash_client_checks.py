"""The periodic check of mpvlab's own DASH client (mpvlab/player/gstreamer/dash_client.py): every check
period the bytes read so far go into the read log, and with SABRE the socket's occupancy goes to the
algorithm, whose answer sets the read pace (abr/sabre.py). The fetch thread runs it between reads and
while it waits, so it stays on time whatever the thread is doing."""

from __future__ import annotations

import time

from mpvlab.player.gstreamer.abr import Sabre
from mpvlab.player.gstreamer.dash_client_net import socket_inq
from mpvlab.player.gstreamer.dash_client_state import ClientState


class ReadChecks(ClientState):
    """The check, its record (`ticks`, `read_log`) and SABRE's rule events."""

    def _check_period(self) -> float:
        return self.abr.p.check_period_s if isinstance(self.abr, Sabre) else 0.2

    def _service(self, wait_s: float) -> None:
        """Sleep up to wait_s while keeping SABRE's periodic check on time."""
        deadline = time.monotonic() + wait_s
        while True:
            self._maybe_tick()
            now = time.monotonic()
            if now >= deadline or self._stop.is_set():
                return
            time.sleep(min(deadline - now, max(0.0, self._next_tick - now), 0.05) or 0.001)

    def _maybe_tick(self) -> None:
        now = time.monotonic()
        if now < self._next_tick:
            return
        dt = now - self._t_tick
        nread, self._bytes_since_tick = self._bytes_since_tick, 0
        self._t_tick = now
        self._next_tick = now + self._check_period()
        t = self.t_of_ns(time.monotonic_ns())
        total = (self.read_log[-1][1] if self.read_log else 0) + nread
        self.read_log.append((round(t, 6), total))
        if not isinstance(self.abr, Sabre) or self.sock is None:
            return
        occ = socket_inq(self.sock)
        buf = self.buffer_level_s()
        # SO_RCVBUF as the kernel reports it (the request doubled); SABRE measures occupancy against the
        # size its occupancy_of names (abr/sabre.py: the payload held was measured at up to 1.88 x the
        # requested value, 246 KB with 131072 requested, 262144 reported).
        rcvbuf = self.rcvbuf_effective or self.rcvbuf
        assert rcvbuf is not None       # SO_RCVBUF is read as the socket opens (self.sock is set here)
        tk = self.abr.tick(occ, rcvbuf, nread, dt, buf, t)
        rate = self.abr.read_rate_bps()
        rec = {"t": round(t, 6), "mode": tk.mode, "changed": tk.changed, "occupancy": round(tk.occupancy, 4),
               "bytes_read": nread, "dt_s": round(dt, 6), "sample_bps": round(tk.sample_bps, 1),
               "app_limited": tk.app_limited, "bw_bps": None if tk.bw_bps is None else round(tk.bw_bps, 1),
               "target_bps": round(self.abr.target_read_bps(), 1), "level": self.abr.level,
               "buffer_s": round(buf, 6), "occupancy_bytes": occ,
               "occupancy_base_bytes": self.abr.occupancy_base(rcvbuf),
               "phase": self.abr.phase, "throttled": self.abr.throttled,
               "read_bps": None if rate is None else round(rate, 1)}
        self.ticks.append(rec)
        if self.abr.general:
            self._sabre_events()     # §4.2 logs its own mode changes (with the target) and throttling
        else:
            self.pacer.set_rate(rate)
            if tk.changed:
                self.emit("sabre_mode", **{k: v for k, v in rec.items() if k != "t"}, t=rec["t"])

    def _sabre_events(self) -> None:
        """SABRE §4.2's rule events into the player's event log, and the read pace they leave."""
        for ev in self.abr.drain_events():
            kind, t = ev.pop("type"), ev.pop("t")
            ev = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in ev.items()}
            self.sabre_events.append({"t": round(t, 6), "type": kind, **ev})
            self.emit(kind, **ev, t=round(t, 6))
        self.pacer.set_rate(self.abr.read_rate_bps())
