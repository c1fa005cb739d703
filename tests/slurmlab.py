"""A real one-node Slurm for tests: munged with a generated key, slurmctld and slurmd, every file in
one temporary directory, own ports, ClusterName hsl<random>; `stop()` ends exactly the processes it
started (by pid) and removes the directory. Slurm runs jobs as root here (SlurmdUser=root)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SlurmLab:
    base: Path
    cluster: str
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def start(cls) -> SlurmLab:
        for tool in ("munged", "slurmctld", "slurmd", "sbatch"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} missing: run ./setup.sh (Debian slurm-wlm, munge)")
        base = Path(tempfile.mkdtemp(prefix="hsl-slurm-"))
        os.chmod(base, 0o755)
        cluster = "hsl" + secrets.token_hex(3)
        for d in ("munge", "state", "spool", "log", "run"):
            (base / d).mkdir(mode=0o700 if d == "munge" else 0o755)
        key = base / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        os.chmod(key, 0o400)
        sock = base / "munge" / "munge.sock"
        host = socket.gethostname()
        cpus = os.cpu_count() or 1
        conf = base / "slurm.conf"
        conf.write_text(f"""ClusterName={cluster}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/run/slurmctld.pid
SlurmdPidFile={base}/run/slurmd.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=30
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=30
SchedulerParameters=sched_interval=2
NodeName=hsl-node1 NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=hsl Nodes=hsl-node1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
""")
        env = {**os.environ, "SLURM_CONF": str(conf)}
        lab = cls(base, cluster, env)
        try:
            lab._spawn(["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}",
                        f"--pid-file={base}/munge/munged.pid", f"--log-file={base}/log/munged.log",
                        f"--seed-file={base}/munge/seed"])
            lab._wait(lambda: sock.exists(), "munged socket")
            lab._spawn(["slurmctld", "-D", "-i", "-f", str(conf)])
            lab._spawn(["slurmd", "-D", "-N", "hsl-node1", "-f", str(conf)])
            lab._wait(lambda: "idle" in lab.cmd("sinfo", "--noheader", "--format=%t").stdout, "node idle",
                      timeout=60)
        except BaseException:
            lab.stop()
            raise
        return lab

    def _spawn(self, argv: list[str]) -> None:
        log = open(self.base / "log" / f"{argv[0]}.stdout", "wb")
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True))
        log.close()

    def _wait(self, ok, what: str, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ok():
                return
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead[0]} exited while waiting for {what}:\n{self.logs()}")
            time.sleep(0.3)
        raise RuntimeError(f"timed out waiting for {what}:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-2000:]}"
                         for f in sorted((self.base / "log").glob("*")) if f.is_file())

    def cmd(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        """Cancel every job of this cluster, then end the daemons we started (slurmd first, so its job
        steps are killed by it) by pid; remove the directory."""
        if any(p.poll() is None for p in self.procs):
            self.cmd("scancel", "--full", "--partition=hsl", timeout=20)
            time.sleep(1)
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=10)
        shutil.rmtree(self.base, ignore_errors=True)
