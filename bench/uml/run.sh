#!/usr/bin/env bash
# Boot the UML kernel from build.sh with guest.sh as init and run the cases of CASES_FILE in it.
# Issue 50's go/no-go probe; never run by CI.
#
#   bench/uml/run.sh CASES_FILE OUT_DIR     # OUT_DIR: results (created; absolute path)
#
# The guest sees the host's / read-only (hostfs), its own tmpfs /tmp and /run, and OUT_DIR
# read-write. Host-side timings go to OUT_DIR/host.txt: wall seconds from launch to the guest's
# init (boot time) and to power-off, and the UML processes' CPU seconds (user+sys, from time -v).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${MPVLAB_UML_CACHE:-/var/cache/mpvlab/uml}
kernel=${MPVLAB_UML_KERNEL:-$cache/build/linux}   # or /usr/bin/linux.uml (Debian, no MPTCP)
mem=${MPVLAB_UML_MEM:-768M}
[ $# -eq 2 ] || { echo "usage: run.sh CASES_FILE OUT_DIR" >&2; exit 2; }
cases=$1
out=$2
[ -x "$kernel" ] || { echo "run.sh: no $kernel; run bench/uml/build.sh first" >&2; exit 2; }
case "$out" in /*) ;; *) echo "run.sh: OUT_DIR must be absolute" >&2; exit 2 ;; esac
delayline=$(cd "$here/../../links/delayline/build" 2>/dev/null && pwd)/mpvlab-delayline
mkdir -p "$out"
cp "$cases" "$out/cases.txt"

# Host CPU of the UML processes (every process running the kernel binary), sampled every 0.5 s:
# "wall_s ticks" (utime+stime+cutime+cstime, clock ticks), so report.py can take each case's transfer window.
sample_cpu() {
	local real tck
	real=$(readlink -f "$kernel")
	while :; do
		tck=0
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/exe" 2>/dev/null)" = "$real" ] || continue
			tck=$((tck + $(awk '{print $14 + $15 + $16 + $17}' "$p/stat" 2>/dev/null || echo 0)))
		done
		echo "$(date +%s.%N) $tck"
		sleep 0.5
	done
}
sample_cpu > "$out/hostcpu.txt" &
sampler=$!
start=$(date +%s.%N)
# UML's memory file goes to TMPDIR; a private one, removed afterwards.
tmp=$(mktemp -d /tmp/mpvlab-uml.XXXXXX)
set +e
TMPDIR=$tmp /usr/bin/time -v -o "$out/time-v.txt" nice -n "${MPVLAB_UML_NICE:-0}" \
	"$kernel" mem="$mem" rootfstype=hostfs rootflags=/ ro quiet loglevel=3 \
	init="$here/guest.sh" MPV_OUT="$out" MPV_CASES=cases.txt MPV_DIR="$here" \
	MPV_DL="$delayline" con0=null,fd:1 con=null < /dev/null > "$out/console.txt" 2>&1
rc=$?
set -e
end=$(date +%s.%N)
kill "$sampler" 2>/dev/null || true
rm -rf "$tmp"
init=$(awk '/^init_start_wall/{print $2}' "$out/boot.txt" 2>/dev/null || echo nan)
cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{print u+s}' "$out/time-v.txt")
{
	echo "launch_wall $start"
	echo "boot_to_init_s $(echo "$init - $start" | bc -l)"
	echo "total_wall_s $(echo "$end - $start" | bc -l)"
	echo "uml_cpu_s $cpu"
	echo "exit $rc"
	echo "host_load $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/host.txt"
cat "$out/host.txt"
