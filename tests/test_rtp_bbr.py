"""The WebRTC-2018 BBR controller of the live-video study (rtp/bbr, Go): its own unit tests on
recorded sample sequences (three-sample filter, recovery sub-states, min-RTT expiry, and the
libwebrtc-2018 audit tests of rtp/bbr/audit2018_test.go), run here so
that the README's one test command covers the Go code too."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from mpvlab.core.paths import checkout_root

RTP = checkout_root() / "rtp"


@pytest.mark.cpu   # cpu: CPU-heavy in several processes, measured 1.27–1.48 cores in S6–S8 (the Go toolchain): beside two light tests it would ask more than two CPUs (S8)
def test_go_unit_tests_of_the_webrtc_bbr_controller() -> None:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        pytest.fail("Go toolchain not found (rtp/ is Go; setup.sh expects the machine's Go)")
    cp = subprocess.run([go, "test", "-count=1", "./..."], cwd=RTP, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    assert "ok  \tmpvlab/rtp/bbr" in cp.stdout, cp.stdout
