"""The --status command printed at Slurm submission (mpvlab/sweeps/commands.py) reads what the submission
wrote: same spec, --quick and results roots, pasteable (quoted)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from mpvlab.sweeps.commands import status_command


def test_status_command_names_everything_the_submission_used(tmp_path: Path) -> None:
    args = argparse.Namespace(spec="sweeps/my study.yaml", quick=True, results=str(tmp_path / "r r"),
                              results_also=[str(tmp_path / "other")])
    argv = shlex.split(status_command(args))
    assert argv == ["mpvlab", "sweep", "sweeps/my study.yaml", "--quick", "--results", str(tmp_path / "r r"),
                    "--results-also", str(tmp_path / "other"), "--status"]
    plain = shlex.split(status_command(argparse.Namespace(spec="s.yaml", quick=False, results="results",
                                                          results_also=None)))
    assert plain == ["mpvlab", "sweep", "s.yaml", "--results", str(Path("results").resolve()), "--status"]
