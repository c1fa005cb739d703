"""Licensing is machine-checked (issue 49 item 4): `reuse lint` passes on the repository (every file
has copyright and licence information, every licence its text in LICENSES/: one of the gates,
tests/test_lint.py runs it with the others), the Mahimahi traces resolve to their upstream licence,
and docs/license.md lists every shipped data file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
REUSE = Path(sys.executable).with_name("reuse")
MAHIMAHI = REPO / "links" / "traces" / "mahimahi"


def _spdx() -> dict[str, tuple[str, str]]:
    """Per file, (licence, copyright) as `reuse spdx` concludes them."""
    cp = subprocess.run([str(REUSE), "--root", str(REPO), "spdx"], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    out = {}
    for block in cp.stdout.split("\n\n"):
        name = re.search(r"^FileName: \./(.+)$", block, re.M)
        if name:
            lic = re.search(r"^LicenseInfoInFile: (.+)$", block, re.M)
            cr = re.search(r"^FileCopyrightText: <text>(.+?)</text>", block, re.M | re.S)
            out[name.group(1)] = (lic.group(1) if lic else "", cr.group(1) if cr else "")
    return out


def test_each_file_has_the_licence_of_its_origin() -> None:
    files = _spdx()
    traces = sorted(p.name for p in MAHIMAHI.iterdir() if p.suffix in (".up", ".down"))
    assert len(traces) == 6, traces
    for name in [*traces, "README.upstream"]:
        lic, cr = files[f"links/traces/mahimahi/{name}"]
        assert lic == "GPL-3.0-or-later" and "The Mahimahi Authors" in cr, (name, lic, cr)
    # mpvlab's own files, the C sources with their own headers included
    for own in ["mpvlab/cli.py", "links/traces/mahimahi/README.md", "cc/bbr_s.bpf.c", "docs/img/rtp-competition-quick.png"]:
        assert files[own][0] == "GPL-2.0-only", (own, files[own])
    assert (REPO / "LICENSES" / "GPL-2.0-only.txt").read_text() == (REPO / "LICENSE").read_text()


def test_license_page_names_every_shipped_data_file() -> None:
    page = (REPO / "docs" / "license.md").read_text()
    stems = {p.name.rsplit(".", 1)[0] for p in MAHIMAHI.iterdir() if p.suffix in (".up", ".down")}
    for stem in stems:
        assert stem in page, stem
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split()
    binary_or_data = [f for f in tracked if f.endswith((".png", ".jpg", ".svg", ".up", ".down", ".csv", ".mp4"))
                      and not f.startswith("links/traces/mahimahi/")]
    for f in binary_or_data:
        assert f in page, f"{f} is shipped but docs/license.md does not say what it is and where it came from"
    for other in ["README.upstream", "BSD-3-Clause", "ae477d4"]:
        assert other in page, other
