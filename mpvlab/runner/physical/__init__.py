"""A run on physical hosts (topology.kind physical): the same video session as an emulated run, with
roles on real machines — this one (LocalHost) or others over SSH (SshHost) — and paths on the
interfaces the scenario names. Every command goes through Host.run/popen, so the code is the same
for local and remote hosts.

Life cycle (each change is journalled in the ledger BEFORE it is made, with the command that undoes
it; teardown runs the journal backwards, and so does a later cleanup after a crash):

  plan      hosts + key files checked (mpvlab/topologies/physical.py)               nothing runs yet
  preflight ssh verified (quoting, setsid), every named interface exists, programs and files
            present on each host, content checksum on the server, emulator forwards, no ingress
            qdisc already on an interface we would shape at, no configured root qdisc where a tbf
            would replace it (delay-then-shape)
  guard     interface_guard on every named interface of every host (snapshot)
  settings  client/server sysctls and MPTCP limits (old values restored), client MPTCP `subflow`
            endpoints and per-source-address policy routing (tables/rules removed after)
  links     on emulator hosts only, on the named interfaces only: tbf (IFB at ingress) + NFQUEUE
            delay line per direction (mpvlab/links/emulator.py's design); no emulator role: the real path
  probes    ping before/after the emulation (added RTT vs configured), curl per path (goodput vs
            configured rate)
  play      Apache on the server host (under the MPTCP wrapper + CC shim), the GStreamer player on the
            client host at run time zero (translated to each host's CLOCK_MONOTONIC), `ss` on the
            server for the subflows, client interface counters for bytes per path
  results   remote files pulled into the local run directory; provenance lists hosts, interfaces,
            every change and its undo result, the guard's verdict, and what was not collected

Modules, one concern each (the order of the life cycle):
  backend.py     the kind's backend of the one run life cycle (mpvlab/runner/lifecycle.py): bring_up,
                 probes, collectors, summary; teardown: journal, then guards
  video.py       the video workload on the hosts (Apache, the player, files pulled back)
  state.py       PhysicalRun (plan, journal, folders, clock offsets, started processes), the error
  journal.py     Journal: each change with its undo, in the ledger before it is made
  hostops.py     what every host shares (checkout path, python3) and file/clock helpers on any Host
  preflight.py   checks before any change
  hostsetup.py   working folders, sysctls, MPTCP limits and endpoints, policy routing
  emulation.py   emulator hosts under the one link step (mpvlab/links/path.py): the journal hook, remote delay lines
  remote.py      Apache on the server, the player on the client
  probes.py      ping and curl per path against the configured delay and rate
  collect.py     interface counters, `ss` subflows, files pulled back, summary.json

Not collected on physical hosts (recorded as such in summary.json and provenance.json): the BPF
scheduler trace (path switches, bytes handed per subflow), qdisc samplers, BBR-S, steering schedulers
— they need a BPF loader in the server's namespace on this machine.

Requirements on every host: the mpvlab checkout (built) at the same path as here, Debian's
/usr/bin/python3 with PyGObject (client), apache2 + mptcpize (server), tc/iptables/ip (emulators,
with net.ipv4.ip_forward=1 already — a router is the emulator's job, we do not turn it on), and the
video at the same cache path on the server (checked by SHA-256).
"""

from __future__ import annotations
