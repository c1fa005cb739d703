"""The link step (mpvlab/links/path.py): the plans of a path, schedule_for with the scenario's folder passed
in, and — on a real namespace standing in for a physical emulator host — a Site the run does not own:
every change journalled before it is made, an existing ingress qdisc never overwritten, the NFQUEUE
rule ahead of an earlier ACCEPT, and the journal's undo commands restoring the host exactly."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mpvlab.core import naming, proc
from mpvlab.core.netns import Netns
from mpvlab.links import path as link_path
from mpvlab.links.emulator import Site
from mpvlab.links.schedule import Schedule
from mpvlab.links.spec import LinkDirection
from mpvlab.testbed.bed import Bed



def test_path_plans_swap_the_interfaces_and_scope_every_name() -> None:
    host = Netns("mpv-h35l00-emu")      # only stored: nothing runs here
    ifbs = link_path.ifb_names("h35l00", 1)
    down, up = link_path.path_plans(host, "lte", 1, server_if="srv0", client_if="cli0",
                                    down=LinkDirection(rate="10mbit"), up=LinkDirection(delay="5ms"),
                                    schedules=(Schedule.constant(0), Schedule.constant(5 * 10**6)),
                                    ifbs=ifbs, seed=7, queues=(27102, 27103), base_dir=Path("/scn"))
    assert (down.label, down.in_if, down.out_if, down.queue_num) == ("lte-down", "srv0", "cli0", 27102)
    assert (up.label, up.in_if, up.out_if, up.queue_num) == ("lte-up", "cli0", "srv0", 27103)
    assert (down.ifb, up.ifb) == (naming.ifname("h35l00", "bi0"), naming.ifname("h35l00", "bi1"))
    assert len(set(ifbs) | set(link_path.ifb_names("h35l00", 0))) == 4      # per path and direction
    assert (down.seed, up.seed) == (7002, 7003)                             # seed·1000 + 2·index + dir
    assert down.router is host and up.base_dir == Path("/scn")
    assert (down.shaper_dev, up.shaper_dev) == (down.ifb, None)             # shape-then-delay: the IFB
    assert (down.needs_delay_line, up.needs_delay_line) == (False, True)


def test_schedule_for_reads_a_trace_from_the_folder_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("# time_ms delay_ms\n0 10\n1000 30\n")
    d = LinkDirection.model_validate({"delay": {"kind": "trace", "file": "t.txt", "repeat": "2s"}})
    s = link_path.schedule_for(d, tmp_path)
    assert (s.times_ns, s.delays_ns, s.period_ns) == ((0, 10**9), (10 * 10**6, 30 * 10**6), 2 * 10**9)
    with pytest.raises(FileNotFoundError):
        link_path.schedule_for(d, tmp_path / "elsewhere")


def _state(ns: Netns) -> tuple[str, str, str]:
    """What the link step may change on a host: its interfaces, qdiscs and FORWARD rules."""
    links = "\n".join(sorted(ln.split(":")[1].strip().split("@")[0]
                             for ln in ns.run(["ip", "-o", "link", "show"]).stdout.splitlines()))
    return links, ns.run(["tc", "qdisc", "show"]).stdout, ns.run(["iptables", "-w", "-S", "FORWARD"]).stdout


@pytest.mark.netns
def test_a_site_the_run_does_not_own_journals_adds_inserts_and_undoes(tmp_path: Path) -> None:
    with Bed(tmp_path) as bed:
        emu, a, b = bed.node("emu"), bed.node("a"), bed.node("b")
        srv_if, cli_if = bed.ifname("s"), bed.ifname("c")
        bed.veth(emu, srv_if, a, bed.ifname("sa"))
        bed.veth(emu, cli_if, b, bed.ifname("cb"))
        # The box's own configuration, which the run must keep: an ACCEPT on the forwarded pair.
        emu.run(["iptables", "-w", "-A", "FORWARD", "-i", srv_if, "-o", cli_if, "-j", "ACCEPT"])
        before = _state(emu)

        journal: list[tuple[list[str], str]] = []
        site = Site(owned=False, journal=lambda undo, what: journal.append((undo, what)))
        down = LinkDirection(rate="10mbit", buffer="50KB", delay="5ms")
        up = LinkDirection(rate="2mbit", order="delay-then-shape")
        plans = link_path.path_plans(emu, "p", 0, server_if=srv_if, client_if=cli_if, down=down, up=up,
                                     schedules=(Schedule.constant(5 * 10**6), Schedule.constant(0)),
                                     ifbs=link_path.ifb_names(bed.run_id, 0), seed=1, queues=(27100, 27101))
        assert bed.ledger is not None
        link = link_path.apply_path(plans, tmp_path, time.monotonic_ns(), bed.ledger.add_proc, site=site)
        try:
            ifb = plans[0].ifb
            rule = ["FORWARD", "-i", srv_if, "-o", cli_if, "-j", "NFQUEUE", "--queue-num", "27100"]
            assert [u for u, _ in journal] == [
                ["ip", "link", "del", ifb],
                ["tc", "qdisc", "del", "dev", srv_if, "ingress"],
                ["iptables", "-w", "-D", *rule],
                ["tc", "qdisc", "del", "dev", srv_if, "root"],          # up: delay-then-shape, tbf on srv_if
            ]
            forward = [ln for ln in emu.run(["iptables", "-w", "-S", "FORWARD"]).stdout.splitlines()
                       if ln.startswith("-A")]
            assert "NFQUEUE" in forward[0] and "ACCEPT" in forward[1], forward     # ahead of the box's ACCEPT
            rec = link.record(host="emu")
            assert rec["p-down"]["shaper_dev"] == ifb and rec["p-down"]["delay_backend"] == "nfqueue-delayline"
            assert rec["p-up"]["shaper_dev"] == srv_if and rec["p-up"]["delay_backend"] == "none"

            # Another path entering by the same interface: its ingress is added, not replaced, so it
            # fails and the first path's redirect stays (on an owned namespace it would be replaced).
            other = link_path.path_plans(emu, "q", 1, server_if=srv_if, client_if=cli_if, down=down,
                                         up=LinkDirection(), schedules=(Schedule.constant(0), Schedule.constant(0)),
                                         ifbs=link_path.ifb_names(bed.run_id, 1), seed=1, queues=(27102, 27103))
            second: list[list[str]] = []
            with pytest.raises(proc.CommandError, match="ingress"):
                link_path.apply_path(other[:1], tmp_path, 0, bed.ledger.add_proc,
                                     site=Site(owned=False, journal=lambda undo, what: second.append(undo)))
            assert f"Redirect to device {ifb})" in emu.run(["tc", "filter", "show", "dev", srv_if, "ingress"]).stdout
            # journalled before each change: its IFB was made, its ingress add failed (nothing to undo)
            assert second == [["ip", "link", "del", other[0].ifb], ["tc", "qdisc", "del", "dev", srv_if, "ingress"]]
            emu.run(second[0])
        finally:
            stats: dict[str, dict[str, object]] = {}
            link.stop_into(stats)
        assert stats["delay_lines"]["p-down"]["exit_code"] == 0            # type: ignore[index]
        assert stats["delay_lines"]["p-up"] == {"delay_line": "none (no delay or loss configured)"}
        for undo, _what in reversed(journal):
            emu.run(undo)
        assert _state(emu) == before
