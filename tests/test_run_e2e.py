"""End-to-end runs through the CLI, as a user runs them (root, real namespaces, MPTCP, Apache,
GStreamer). Numbers are checked against first principles, and so is the teardown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hostnoise import assert_playback_accounted, assert_played_through, cpu_late_frames_allowed, lowered
from mpvlab.core import ledger, netns
from mpvlab.core.hoststeal import StealWindow
from mpvlab.results import checks
from mpvlab.results import summary as summary_model
from mpvlab.core.paths import checkout_root

FPS = 30
REPO = checkout_root()
pytestmark = [pytest.mark.netns, pytest.mark.e2e]
# Per test (issue 44): `cpu` or `cpu_light` on every test that starts a run (most assert its fidelity
# verdict and timing bounds, tests/hostnoise.py); `cpu_light` where the run's processes were measured at
# under 0.35 cores (docs/testing.md), so two such runs fit in one of CI's two cores. The plot reads the
# smoke run in one process; that run is made in its users' strongest slot (tests/policy.py).

SHORT = """\
name: {name}
seed: 3
paths:
  wifi:
    down: {{rate: {wifi_rate}, buffer: 100KB, delay: {{kind: square, base: 5ms, amplitude: 40ms, period: 4s}}}}
  lte:
    down: {{rate: {lte_rate}, buffer: 100KB, delay: 20ms}}
video: {{duration: {duration}, bitrate: 2mbit, width: 640, height: 360}}
fidelity: {{probe_duration: 2s}}
"""


def write_short(tmp: Path, name: str, wifi_rate: str = "3mbit", lte_rate: str = "3mbit", duration: str = "6s") -> Path:
    f = tmp / f"{name}.yaml"
    f.write_text(SHORT.format(name=name, wifi_rate=wifi_rate, lte_rate=lte_rate, duration=duration))
    return f


def mpvlab(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpvlab", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def played_through(s: dict[str, Any]) -> None:
    """Ample bandwidth: no underflow, every frame accounted for, CPU-late discards only as many as the
    steal the run recorded during playback explains (tests/hostnoise.py). Our videos are 30 fps."""
    assert_played_through(s, StealWindow.from_dict(s["host_steal_during_playback"]), FPS)


def every_byte_sent_once_and_handed(s: dict[str, Any], size: int) -> None:
    """The msk sent the file plus the HTTP response header (a few hundred bytes) as new data, exactly
    once; and the scheduler trace saw every byte the msk sent or re-sent handed to a subflow. Handed
    may exceed sent + re-sent: when a subflow goes stale or closes, the kernel re-queues its unacked
    data and pushes it again without counting it in either counter. A bound from the MIB's
    reinjection count does not hold: one count is one skb, which carried 12220 bytes in a CI run."""
    m = s["mptcp"]
    assert 100 < m["sent_bytes"] - size < 1000, (size, m)
    handed = sum(p["payload_bytes_handed"] for p in s["paths"].values())
    assert handed >= m["sent_bytes"] + m["reinjected_bytes"], (handed, m)
    assert (m["reinjected_bytes"] > 0) <= (m["reinjected_segments"] > 0), m


def played_accounted(s: dict[str, Any]) -> None:
    """5.24 Mbit/s over 2 x 3 Mbit/s (5.74 Mbit/s of goodput) leaves 9.5 % of headroom, and the Wi-Fi
    delay steps by 60 ms every 5 s: a 2 s playout buffer may then underflow for a moment (a clean CI
    run: 2 underflows, 0.67 s in all, 1 s after the step at 5 s, 0 steal; most runs have none). So
    these runs check that every frame and stall is accounted for, not that none happened."""
    assert_playback_accounted(s, StealWindow.from_dict(s["host_steal_during_playback"]), FPS)


def only_run_dir(results: Path, name: str) -> Path:
    dirs = [d for d in (results / name).iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def assert_nothing_left(run_id: str) -> None:
    assert not [n for n in netns.list_netns() if run_id in n], netns.list_netns()
    assert not (ledger.LEDGER_DIR / f"{run_id}.json").exists()
    assert not (ledger.WWW_DIR / run_id).exists()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"mv{run_id}" not in links
    ccs = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
    assert run_id not in ccs


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    results = tmp_path_factory.mktemp("results")
    cp = mpvlab("run", "scenarios/smoke.yaml", "--results", str(results), timeout=300)
    return cp, results


@pytest.mark.cpu_light   # cpu_light: measured 0.13 cores (docs/testing.md)
def test_smoke_run_is_complete_and_correct(smoke: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    cp, results = smoke
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run = only_run_dir(results, "smoke")
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "complete"
    for f in ("scenario.yaml", "resolved.yaml", "provenance.json", "summary.json", "logs/player-summary.json",
              "logs/apache/access.log", "data/links.csv", "data/subflows.csv", "data/schedtrace/switches.csv"):
        assert (run / f).exists(), f
    s = json.loads((run / "summary.json").read_text())
    prov = json.loads((run / "provenance.json").read_text())
    size = prov["content"]["size_bytes"]

    every_byte_sent_once_and_handed(s, size)
    assert s["host_steal_during_playback"]["window_s"] >= 19.5
    # On the wire: one 90-byte header per <= 1424-byte payload, so between the ideal 1514/1424 and
    # +1 % for ACKs of the request and retransmissions.
    wire = sum(p["rx_bytes"] for p in s["paths"].values())
    assert size * 1514 / 1424 * 0.995 < wire < size * 1514 / 1424 * 1.02
    # Both subflows, one per path, both running the chosen CC; each path carried a real share.
    assert len(s["subflows"]) == 2 and {x["cc"] for x in s["subflows"]} == {"cubic"}
    assert all(p["share"] >= 0.05 for p in s["paths"].values())
    assert s["frames_expected"] == 600
    played_accounted(s)
    assert abs(s["duration_s"] - 20.0) < 0.5
    assert all(c["ok"] for c in s["cross_checks"].values()), s["cross_checks"]
    # the checks the run made are exactly the registry's rows for a progressive run without pcap,
    # probe or CC state model (mpvlab/results/checks.py CHECKS)
    want = checks.expected_records("progressive", {"mptcp-trace"}, list(s["paths"]))
    assert set(s["cross_checks"]) == want["cross_checks"], (sorted(s["cross_checks"]), want)
    assert set(s["fidelity_checks"] or {}) == want["fidelity_checks"], (s["fidelity_checks"], want)
    assert s["path_switches"] > 0
    # Pre-run check: each 3 Mbit/s tbf dequeued at its rate while backlogged (qdisc counters) within
    # 3 %, less the share of CPU time the hypervisor took meanwhile (tests/hostnoise.py); the
    # kernel-stamped RTT matched the schedules.
    steal = prov["fidelity"]["host_steal"]["rate_check"]
    assert 0 <= steal["fraction"]
    for path in ("wifi", "lte"):
        rate = prov["fidelity"]["paths"][path]["rate_down"]
        lo, hi = lowered(3e6, 0.03, steal["fraction"])
        assert lo <= rate["achieved_bps"] <= hi, (rate, steal)
        assert abs(prov["fidelity"]["paths"][path]["rtt"]["error_ms_p50"]) < 1.0
    # The whole-run verdict: lateness and the playback window's tbf rate per direction.
    assert {r["link"] for r in s["fidelity_table"]} == {"wifi-down", "wifi-up", "lte-down", "lte-up"}
    assert prov["fidelity"]["run"]["wifi-down"]["lateness_packets"] > 1000
    # Provenance
    assert prov["host"]["kernel"] == os.uname().release
    assert prov["seed"] == 1 and prov["cc"]["kernel_name"] == "cubic"
    assert prov["packages"]["debian"]["apache2"]
    assert prov["delay_lines"]["wifi-down"]["delay_steps"] >= 1
    assert_nothing_left(s["run_id"])


@pytest.mark.cpu_light   # cpu_light: measured 0.24 cores (docs/testing.md)
def test_smoke_summary_validates_part_by_part(smoke: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """A real run's summary.json, cut into the parts the runner builds (mpvlab/results/summary.py parts):
    each part valid on its own model, and every part a progressive dual-path run makes is there."""
    cp, results = smoke
    assert cp.returncode == 0, cp.stdout + cp.stderr
    s = json.loads((only_run_dir(results, "smoke") / "summary.json").read_text())
    names = summary_model.validated_by_part(s)
    assert {"run head", "player QoE", "paths.wifi", "paths.lte", "subflows[0]", "subflows[1]", "mptcp", "http",
            "host_steal_during_playback", "fidelity_table[0]", "cross_checks.collector_lost_events"} <= set(names), names


def test_plot_of_a_run(smoke: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _cp, results = smoke
    run = only_run_dir(results, "smoke")
    cp = mpvlab("plot", str(run))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    png = run / "plots" / "cwnd_throughput.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


@pytest.mark.cpu_light   # cpu_light: measured 0.30 cores (docs/testing.md)
def test_concurrent_runs_do_not_interfere(tmp_path: Path) -> None:
    results = tmp_path / "results"
    procs = [subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(write_short(tmp_path, f"conc{i}")),
                               "--results", str(results)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=REPO) for i in range(2)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    ids = set()
    for i in range(2):
        run = only_run_dir(results, f"conc{i}")
        s = json.loads((run / "summary.json").read_text())
        ids.add(s["run_id"])
        # 2 Mbit/s video over 2 × 3 Mbit/s: no stall even with two runs sharing the CPU.
        assert s["frames_expected"] == 180
        played_through(s)
        assert all(c["ok"] for c in s["cross_checks"].values()), s["cross_checks"]
        assert_nothing_left(s["run_id"])
    assert len(ids) == 2


@pytest.mark.cpu_light   # cpu_light: measured 0.13 cores (docs/testing.md)
def test_thin_path_fails_the_run_with_a_clear_message(tmp_path: Path) -> None:
    # A 6 s, 2 Mbit/s video is 1.5 MB, 5 % of it 75 KB; lte at 32 kbit/s carries at most 4 KB per
    # second of the run, so the 6 s video would have to stall for over 12 s to give lte 5 %. Its
    # 4 KB queue (1 s) bounds each stall behind it (with a 100 KB queue at 64 kbit/s, 12.5 s, one
    # stall once took 6.6 s and lte reached 9 %). The pre-run check is not what this test is about.
    f = tmp_path / "thin.yaml"
    f.write_text(SHORT.format(name="thin", wifi_rate="20mbit", lte_rate="32kbit", duration="6s")
                 .replace("{rate: 32kbit, buffer: 100KB", "{rate: 32kbit, buffer: 4KB")
                 .replace("fidelity: {probe_duration: 2s}", "fidelity: {probe: false}"))
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "r"))
    assert cp.returncode == 1
    assert "path(s) carried less than 5% of the bytes" in cp.stdout and "lte" in cp.stdout
    run = only_run_dir(tmp_path / "r", "thin")
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and "less than 5%" in status["reason"]
    assert not (run / "summary.json").exists()
    assert_nothing_left(run.name)


def _start_and_wait_for_playback(tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], Path]:
    f = write_short(tmp_path, name, duration="30s")
    results = tmp_path / "r"
    # SIGINT as a terminal would deliver it, also when pytest itself was started with SIGINT ignored
    # (a background job of a shell without job control inherits SIG_IGN, and so would the run).
    p = subprocess.Popen([sys.executable, "-m", "mpvlab", "run", str(f), "--results", str(results)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = list((results / name).glob("*/logs/player-events.jsonl")) if (results / name).exists() else []
        if runs and '"type":"start"' in runs[0].read_text():      # at t0; the file exists from staging
            return p, runs[0].parent.parent
        time.sleep(0.2)
    p.kill()
    raise AssertionError("run never reached playback: " + (p.communicate()[0] or ""))


@pytest.mark.cpu_light   # cpu_light: measured 0.32 cores (docs/testing.md)
def test_sigint_tears_everything_down(tmp_path: Path) -> None:
    p, run = _start_and_wait_for_playback(tmp_path, "sigint")
    time.sleep(1.0)
    assert [n for n in netns.list_netns() if run.name in n]  # the run is really up
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 130, out          # interrupted: as an interrupted sweep (docs/results.md: exit codes)
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and "interrupt" in status["reason"].lower()
    assert (run / "provenance.json").exists()
    assert_nothing_left(run.name)


@pytest.mark.cpu_light   # cpu_light: measured 0.29 cores (docs/testing.md)
def test_sigkilled_run_is_cleaned_by_the_next(tmp_path: Path) -> None:
    p, run = _start_and_wait_for_playback(tmp_path, "sigkill")
    p.kill()
    p.wait()
    left = [n for n in netns.list_netns() if run.name in n]
    assert left  # a SIGKILLed runner cannot clean up: its namespaces are still there
    cp = mpvlab("cleanup")
    assert cp.returncode == 0
    assert_nothing_left(run.name)
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and "runner died" in status["reason"]


@pytest.mark.cpu
def test_killed_delay_line_fails_the_run(tmp_path: Path) -> None:
    p, run = _start_and_wait_for_playback(tmp_path, "dlkill")
    led = json.loads((ledger.LEDGER_DIR / f"{run.name}.json").read_text())
    victim = next(x for x in led["procs"] if x["label"] == "delayline wifi-down")
    os.kill(int(victim["pid"]), signal.SIGKILL)
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 1, out
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed"
    assert "delay line wifi-down exited" in status["reason"] and "lost all packets" in status["reason"]
    assert_nothing_left(run.name)


@pytest.mark.cpu_light   # cpu_light: measured 0.17 cores (docs/testing.md)
def test_dumbbell_single_path(tmp_path: Path) -> None:
    f = tmp_path / "db.yaml"
    f.write_text("name: db\ntopology: {kind: dumbbell}\npaths:\n  path:\n    down: {rate: 10mbit, buffer: 200KB, "
                 "delay: 20ms}\nvideo: {duration: 4s, bitrate: 2mbit, width: 640, height: 360}\n"
                 "fidelity: {probe_duration: 2s}\n")
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "r"))
    assert cp.returncode == 0, cp.stdout
    s = json.loads((only_run_dir(tmp_path / "r", "db") / "summary.json").read_text())
    assert len(s["subflows"]) == 1 and s["paths"]["path"]["share"] == 1.0
    assert s["frames_expected"] == 120
    played_through(s)
    assert s["path_switches"] == 0  # one subflow: nothing to switch between


STEER = """\
name: {name}
paths:
  wifi:
    down: {{rate: 3mbit, buffer: 20KB, delay: 50ms}}
  lte:
    down: {{rate: 3mbit, buffer: 20KB, delay: 10ms}}
transport: {{cc: cubic, scheduler: {scheduler}}}
hosts: {{client_tcp_rmem: [4KiB, 64KiB, 128KiB]}}
video: {{duration: 20s, bitrate: 1.5mbit, width: 640, height: 360}}
player: {{buffer: 1s, startup_buffer: 500ms}}
observe: {{min_path_share: 0}}
fidelity: {{probe_duration: 2s}}
"""


def _steered_share(tmp_path: Path, scheduler: str) -> tuple[float, dict[str, Any]]:
    f = tmp_path / f"{scheduler}.yaml"
    f.write_text(STEER.format(name=scheduler, scheduler=scheduler))
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "r"))
    assert cp.returncode == 0, cp.stdout
    run = only_run_dir(tmp_path / "r", scheduler)
    s = json.loads((run / "summary.json").read_text())
    # The network never starved the player; every frame is accounted for; CPU-late discards only as
    # the host's steal explains (measured once: 8 of 600 frames at 66 % steal).
    played_through(s)
    handed = {n: p["payload_bytes_handed"] for n, p in s["paths"].items()}
    s["provenance"] = json.loads((run / "provenance.json").read_text())
    return handed["lte"] / sum(handed.values()), s


@pytest.mark.cpu_light   # cpu_light: measured 0.13 cores (docs/testing.md)
def test_steered_schedulers_in_runs(tmp_path: Path) -> None:
    """Mean demand (1.5 Mbit/s) below one path's capacity (3 Mbit/s × 1448/1514 = 2.87 Mbit/s), the
    initial subflow on the 50 ms path, the 10 ms path second. Against the kernel's default in the
    same conditions, minrtt moves bytes to the 10 ms path and bdp to the 50 ms path (5× the BDP at
    equal rates). A player reads in bursts: each time its buffer drains the receive window reopens
    and ~80 KB are handed at once, more than the fast path's window, so minRTT by its definition
    (the next subflow when the lowest-RTT one has no window space) spills part of each burst onto
    the slow path; the >= 90 % bound for smooth demand is in tests/test_schedulers.py. Buffers are
    20 KB (53 ms at 3 Mbit/s) so queueing cannot lift the 10 ms path's RTT (<= 73 ms) above the
    50 ms path's (>= 100 ms). Measured here, share on the fast path in single runs: default 0.46-0.63
    (the kernel's linger-time choice follows the bursts; the high end under a loaded CI run), minrtt
    0.63-0.78, bdp 0.28-0.39. The ranges of default and minrtt touch, so one run of each cannot order
    them; what one run does show: minrtt puts a majority on the fast path, bdp a minority, with a clear
    gap between them, and default leaves both paths in use."""
    shares = {}
    for scheduler in ("default", "minrtt", "bdp"):
        shares[scheduler], s = _steered_share(tmp_path, scheduler)
        steer = s["steering"]
        if scheduler == "default":
            assert steer is None and s["provenance"]["scheduler"]["mechanism"] == "kernel default scheduler"
            continue
        # Data the kernel assigns between a policy change and the flag call is non-conformant.
        assert steer["policy"] == scheduler and steer["conformance"]["by_bytes"] >= 0.95, steer
        assert steer["lost_events"] == {"ringbuf": 0, "map_full": 0, "userspace": 0}
        assert s["provenance"]["scheduler"]["kernel_bpf_struct_ops_mptcp_sched"] is False
    assert shares["minrtt"] >= 0.55 and shares["bdp"] <= 0.45, shares
    assert shares["minrtt"] - shares["bdp"] >= 0.15, shares
    assert 0.25 <= shares["default"] <= 0.75, shares


@pytest.mark.cpu_light   # cpu_light: measured 0.15 cores (docs/testing.md)
def test_dash_run_with_bba(tmp_path: Path) -> None:
    f = tmp_path / "dash.yaml"
    f.write_text("""\
name: dash
paths:
  wifi: {down: {rate: 3mbit, buffer: 100KB, delay: 20ms}}
  lte: {down: {rate: 3mbit, buffer: 100KB, delay: 30ms}}
video: {kind: dash, duration: 12s, bitrates: [500kbit, 1mbit, 2mbit], segment: 2s, width: 640, height: 360}
player: {abr: bba, buffer: 8s, bba_reservoir: 2s, bba_cushion: 4s}
fidelity: {probe_duration: 2s}
""")
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "r"))
    assert cp.returncode == 0, cp.stdout
    s = json.loads((only_run_dir(tmp_path / "r", "dash") / "summary.json").read_text())
    d = s["dash"]
    assert d["segments"] == 6 and d["abr"]["name"] == "bba" and d["abr_policy_mismatches"] == 0
    assert 0 <= d["quality_avg"] <= 2 and abs(d["stall_rate"]) < 0.05
    assert s["frames_expected"] == 360
    played_through(s)
    assert_nothing_left(s["run_id"])


@pytest.mark.cpu_light   # cpu_light: measured 0.14 cores (docs/testing.md)
def test_bottleneck_buffer_fills_and_stall_accounting(tmp_path: Path) -> None:
    """A 4 Mbit/s video over a 3 Mbit/s path: CUBIC fills the 100 KB tbf queue (the edge hop keeps
    TCP Small Queues from capping it at a few packets) and tail-drops; in rebuffer mode the player
    stalls, and playback time − video length equals the total underflow time."""
    f = tmp_path / "fill.yaml"
    f.write_text("name: fill\ntopology: {kind: dumbbell}\npaths:\n  path:\n    down: {rate: 3mbit, buffer: 100KB, "
                 "delay: 20ms}\nvideo: {duration: 8s, bitrate: 4mbit, width: 640, height: 360}\n"
                 "player: {mode: rebuffer}\nfidelity: {probe_duration: 2s}\n")
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "r"))
    assert cp.returncode == 0, cp.stdout
    s = json.loads((only_run_dir(tmp_path / "r", "fill") / "summary.json").read_text())
    (q,) = s["paths"]["path"]["bottleneck"].values()
    assert 0.9 * 100_000 <= q["backlog_bytes_max"] <= 100_000 and q["drops"] >= 1, q
    # 8 s × 4 Mbit/s = 4 MB at 3e6 × 1448/1514 bit/s ≈ 11.2 s of transfer: at least ~2 s of stalls.
    assert s["underflows"] >= 1 and s["underflow_total_s"] > 1.5
    assert s["duration_s"] - 8.0 == pytest.approx(s["underflow_total_s"], abs=0.1)
    # Rebuffering pauses the clock, so no frame is late for the network; for the CPU only as steal explains.
    assert s["frames_rendered"] + s["picture_discards"] == s["frames_expected"] == 240
    steal = StealWindow.from_dict(s["host_steal_during_playback"])
    assert s["picture_discards"] <= cpu_late_frames_allowed(steal, FPS), (s["picture_discards"], steal.describe())


@pytest.mark.cpu
def test_shell_brings_the_network_up_and_down(tmp_path: Path) -> None:
    cmds = tmp_path / "cmds.mn"
    cmds.write_text("client ping -c 3 -i 0.2 10.0.100.1\n")
    cp = mpvlab("shell", "scenarios/smoke.yaml", "--commands", str(cmds), timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "3 packets transmitted, 3 received" in cp.stdout + cp.stderr  # Mininet prints to stderr
    run_id = cp.stdout.split("run ", 1)[1].split(":", 1)[0]
    assert_nothing_left(run_id)


PER_PATH = """\
name: per-path
seed: 2
topology: {server_addressing: per-path}
paths:
  wifi:
    down: {rate: 3mbit, buffer: 100KB, delay: {kind: square, base: 5ms, amplitude: 60ms, period: 10s, duty: 0.5}}
  lte:
    down: {rate: 3mbit, buffer: 100KB, delay: 20ms}
transport: {cc: cubic, scheduler: default}
video: {duration: 10s, bitrate: 5.24mbit}
player: {mode: discard}
fidelity: {probe_duration: 2s}
"""


@pytest.mark.cpu_light   # cpu_light: measured 0.18 cores (docs/testing.md)
def test_per_path_server_addressing(tmp_path: Path) -> None:
    """One server address per path: the client connects to path 0's address, the server signals path 1's,
    and the join goes lte address -> path 1's server address; nothing else (routers forward only their
    own path's server address, so a wrong pair could not carry data and would fail the run)."""
    f = tmp_path / "per-path.yaml"
    f.write_text(PER_PATH)
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "results"), timeout=240)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run = only_run_dir(tmp_path / "results", "per-path")
    s = json.loads((run / "summary.json").read_text())
    prov = json.loads((run / "provenance.json").read_text())
    topo = prov["topology"]
    assert topo["server_addressing"] == "per-path" and topo["server_addr"] == "10.0.101.1"
    assert {n: (p["client_addr"], p["server_addr"]) for n, p in topo["paths"].items()} == {
        "wifi": ("10.0.1.2", "10.0.101.1"), "lte": ("10.0.2.2", "10.0.102.1")}
    # The server's in-kernel PM signals path 1's address; the client has no subflow endpoint.
    hosts = {ns.rsplit("-", 1)[1]: v for ns, v in prov["hosts"].items()}
    assert hosts["server"]["mptcp_endpoints"] == "10.0.102.1 id 1 signal"
    assert hosts["client"]["mptcp_endpoints"] == ""
    # Exactly the two subflows, each (client address, server address) of its own path, both cubic.
    pairs = sorted((x["peer"].rsplit(":", 1)[0], x["local"].rsplit(":", 1)[0], x["cc"]) for x in s["subflows"])
    assert pairs == [("10.0.1.2", "10.0.101.1", "cubic"), ("10.0.2.2", "10.0.102.1", "cubic")]
    assert s["cross_checks"]["subflow_addresses"]["stray"] == []
    assert all(c["ok"] for c in s["cross_checks"].values()), s["cross_checks"]
    # 5.24 Mbit/s needs both 3 Mbit/s paths: each carries a real share; every frame is accounted for.
    assert all(p["share"] >= 0.05 for p in s["paths"].values()), s["paths"]
    size = prov["content"]["size_bytes"]
    every_byte_sent_once_and_handed(s, size)
    assert s["frames_expected"] == 300 and s["frames_accounted"] is True
    played_accounted(s)
    # Fidelity checks went to each path's own server address: each 3 Mbit/s tbf's rate.
    steal = prov["fidelity"]["host_steal"]["rate_check"]
    for path in ("wifi", "lte"):
        rate = prov["fidelity"]["paths"][path]["rate_down"]
        lo, hi = lowered(3e6, 0.03, steal["fraction"])
        assert lo <= rate["achieved_bps"] <= hi, (rate, steal)
        assert abs(prov["fidelity"]["paths"][path]["rtt"]["error_ms_p50"]) < 1.0
    assert_nothing_left(s["run_id"])


@pytest.mark.cpu_light   # cpu_light: measured 0.20 cores (docs/testing.md)
def test_per_path_addressing_with_steering_scheduler(tmp_path: Path) -> None:
    """Per-path addressing under a steering scheduler: the server runs the userspace path manager, which
    ignores endpoints, so the controller itself announces path 1's server address (ADD_ADDR once the
    connection is established); the client joins it from its lte address, and each subflow carries its
    own path's (client, server) address pair."""
    f = tmp_path / "per-path-minrtt.yaml"
    f.write_text(PER_PATH.replace("name: per-path", "name: per-path-minrtt")
                 .replace("scheduler: default", "scheduler: minrtt"))
    cp = mpvlab("run", str(f), "--results", str(tmp_path / "results"), timeout=240)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run = only_run_dir(tmp_path / "results", "per-path-minrtt")
    s = json.loads((run / "summary.json").read_text())
    prov = json.loads((run / "provenance.json").read_text())
    hosts = {ns.rsplit("-", 1)[1]: v for ns, v in prov["hosts"].items()}
    assert hosts["server"]["mptcp_endpoints"] == ""          # nothing for the in-kernel PM to signal
    steer = json.loads((run / "data" / "scheduler" / "steer_summary.json").read_text())
    assert steer["announce"] == {"addresses": ["10.0.102.1"], "calls": 1, "errors": 0}
    rows = (run / "data" / "scheduler" / "announces.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].split(",")[2:5] == ["10.0.102.1", "1", "ok"], rows
    pairs = sorted((x["peer"].rsplit(":", 1)[0], x["local"].rsplit(":", 1)[0]) for x in s["subflows"])
    assert pairs == [("10.0.1.2", "10.0.101.1"), ("10.0.2.2", "10.0.102.1")]
    assert all(c["ok"] for c in s["cross_checks"].values()), s["cross_checks"]
    # No SET_FLAGS error, and every assignment conformed. There may be no flag call at all: 5.24 Mbit/s
    # saturates both 3 Mbit/s paths, so both can stay allowed for the whole run.
    assert steer["set_flags"]["errors"] == 0
    assert steer["conformance"]["by_bytes"] >= 0.99
    assert all(p["share"] >= 0.05 for p in s["paths"].values()), s["paths"]
    assert s["frames_expected"] == 300
    played_accounted(s)
    assert_nothing_left(s["run_id"])
