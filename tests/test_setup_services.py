"""./setup.sh leaves no service running or enabled that was not before it ran (issue 49 item 5): the
functions it sources from setup-services.sh, run against a stand-in `systemctl` (first on PATH) that
keeps each service's state in files and logs every call, so the real services of this host are never
touched. The install is simulated the way Debian's packages behave on a systemd host: every service
enabled and started."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from mpvlab.core.paths import checkout_root

REPO = checkout_root()

FAKE_SYSTEMCTL = """#!/bin/bash
# stand-in: state/<svc>.enabled and state/<svc>.active hold the state; calls.log the calls
d="$(dirname "$0")/state"; echo "$*" >> "$(dirname "$0")/calls.log"
case "$1" in
  is-enabled) cat "$d/$2.enabled" 2>/dev/null || { echo disabled; exit 1; } ;;
  is-active)  cat "$d/$2.active" 2>/dev/null || { echo inactive; exit 3; } ;;
  stop)       echo inactive > "$d/$2.active" ;;
  disable)    s="$2"; [ "$s" = --quiet ] && s="$3"; echo disabled > "$d/$s.enabled" ;;
esac
"""


def _run(tmp: Path, before: dict[str, tuple[str, str]], install_fails: bool = False) -> tuple[str, list[str]]:
    bindir, state = tmp / "bin", tmp / "bin" / "state"
    state.mkdir(parents=True)
    (bindir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bindir / "systemctl").chmod(0o755)
    for svc, (enabled, active) in before.items():
        (state / f"{svc}.enabled").write_text(enabled + "\n")
        (state / f"{svc}.active").write_text(active + "\n")
    (tmp / "systemd").mkdir()      # as if systemd were PID 1
    script = f"""
set -euo pipefail
source {REPO / 'setup-services.sh'}
services_before_install
rc=0; "$POLICY_RC_D" || rc=$?; echo "policy-rc.d exit $rc" >> {tmp / 'policy.log'}
for s in "${{SETUP_SERVICES[@]}}"; do echo enabled > {state}/$s.enabled; echo active > {state}/$s.active; done
services_after_install
if [ ! -e "$POLICY_RC_D" ]; then echo "policy-rc.d removed" >> {tmp / 'policy.log'}; fi
"""
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "SYSTEMD_RUN_DIR": str(tmp / "systemd"),
           "POLICY_RC_D": str(tmp / "policy-rc.d")}
    cp = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    calls = (bindir / "calls.log").read_text().splitlines()
    return cp.stdout + (tmp / "policy.log").read_text(), calls


def test_only_what_the_install_enabled_or_started_is_disabled_or_stopped(tmp_path: Path) -> None:
    before = {"apache2": ("enabled", "active"),       # the host's own web server: left alone
              "ssh": ("enabled", "inactive"),         # enabled before, not running: stopped, stays enabled
              "munge": ("disabled", "inactive")}      # slurmctld, slurmd: not installed before
    out, calls = _run(tmp_path, before)
    changes = [c for c in calls if c.split()[0] in ("stop", "disable")]
    assert sorted(changes) == sorted([
        "stop ssh", "stop munge", "disable --quiet munge",
        "stop slurmctld", "disable --quiet slurmctld", "stop slurmd", "disable --quiet slurmd"]), changes
    assert not any("apache2" in c for c in changes)
    # while the packages were installed, invoke-rc.d was told to start nothing; afterwards no trace
    assert "policy-rc.d exit 101" in out and "policy-rc.d removed" in out
    state = tmp_path / "bin" / "state"
    assert (state / "apache2.active").read_text().strip() == "active"
    assert (state / "ssh.enabled").read_text().strip() == "enabled"
    for s in ("munge", "slurmctld", "slurmd"):
        assert (state / f"{s}.active").read_text().strip() == "inactive"
        assert (state / f"{s}.enabled").read_text().strip() == "disabled"


def test_an_existing_policy_rc_d_is_left_as_it_was(tmp_path: Path) -> None:
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n# the host's own\n")
    policy.chmod(0o755)
    _run(tmp_path, {})
    assert policy.read_text().endswith("# the host's own\n")


def test_setup_lists_what_it_installs_with_reasons_before_installing() -> None:
    text = (REPO / "setup.sh").read_text()
    listing, install = text.index('installing ${#missing[@]} Debian packages, and why'), text.index("apt-get -o")
    assert listing < install
    assert text.index("services_before_install") < install < text.index("services_after_install\n")
    groups = [line for line in text.splitlines() if line.startswith('  "') and "|" in line]
    assert len(groups) >= 10 and all(line.split("|")[0].strip(' "') for line in groups)
    for pkg in ("apache2", "openssh-server", "chromium", "slurmctld", "slurmd", "munge"):
        assert any(pkg in line.split("|")[1].strip('" ').split() for line in groups), pkg
