#!/bin/sh
# PID 1 of the UML guest (issue 50 probe): mounts what the test needs on the read-only hostfs root,
# builds a dual-path topology from network namespaces, runs the cases of $MPV_CASES, writes results
# to the host directory $MPV_OUT (a hostfs mount), powers off.
#
# Kernel command line (bench/uml/run.sh writes it): init=<this file> MPV_OUT=<host dir>
# MPV_CASES=<file in MPV_OUT> MPV_DIR=<bench/uml in the checkout>. UML hands name=value
# arguments it does not know to init as environment variables.
#
# Case lines: NAME SCHED RATE_MBIT DELAY1_MS DELAY2_MS BACKEND SECONDS TRACE [LIMIT_B BURST_B]
#   SCHED   default | mpv_minrtt | mpv_bdp;  RATE_MBIT 0 = no shaper, R1,R2 = per path;
#   DELAYi_MS one-way, each way
#   BACKEND netem | delayline | none;  SECONDS of sending;  TRACE 1 = log every decision
#   LIMIT_B, BURST_B: the tbf's queue limit and burst in bytes (0 or absent: 100 ms of the rate, at
#   least 30,000 B; 1 ms of the rate, at least 10 frames)
# Topology: client c --(path i: c-ri 10.i.1.0/24)-- router ri --(10.i.2.0/24)-- server s, i = 1, 2.
# The server's path-2 address is announced (signal); shaping and delay on each router.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /run/netns /tmp/out
mount -t hostfs -o "$MPV_OUT" none /tmp/out
O=/tmp/out
echo "init_start_wall $(date +%s.%N)" > $O/boot.txt
cat /proc/uptime >> $O/boot.txt
uname -a > $O/uname.txt
cat /proc/sys/net/mptcp/available_schedulers > $O/available_schedulers.txt 2>&1
# A kernel with modules (Debian's user-mode-linux 6.1): its modules from the package (no kmod on the
# host's root: modload.py calls finit_module).
kver=$(uname -r)
if [ -d "/usr/lib/uml/modules/$kver" ]; then
	python3 "$MPV_DIR/modload.py" "/usr/lib/uml/modules/$kver" veth sch_tbf sch_netem nfnetlink_queue \
		nf_tables nft_compat xt_NFQUEUE iptable_filter 2>> $O/modload.txt
fi
D="$MPV_DIR"
# No MPTCP in the guest kernel: plain TCP over path 1 (delay, rate and CPU figures only).
if [ -e /proc/sys/net/mptcp/enabled ]; then proto=mptcp; else proto=tcp; fi
export MPVLAB_XFER_PROTO=$proto
echo "proto $proto" >> $O/boot.txt
DL="$MPV_DL"

nsx() { ns=$1; shift; ip netns exec "$ns" "$@"; }

setup_topo() {
	for n in c s r1 r2; do ip netns add $n; nsx $n ip link set lo up; done
	for i in 1 2; do
		ip link add c$i netns c type veth peer name rc netns r$i
		ip link add s$i netns s type veth peer name rs netns r$i
		nsx c ip addr add 10.$i.1.2/24 dev c$i
		nsx r$i ip addr add 10.$i.1.1/24 dev rc
		nsx r$i ip addr add 10.$i.2.1/24 dev rs
		nsx s ip addr add 10.$i.2.2/24 dev s$i
		for pair in "c c$i" "s s$i" "r$i rc" "r$i rs"; do
			# shellcheck disable=SC2086  # split on purpose: "NAMESPACE DEVICE" (POSIX sh has no arrays)
			set -- $pair
			nsx "$1" ip link set "$2" up
			# per-packet decisions need MSS-sized skbs: no segmentation offloads
			nsx "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1
		done
		nsx r$i sysctl -qw net.ipv4.ip_forward=1
		nsx c ip route add 10.$i.2.0/24 via 10.$i.1.1
		nsx s ip route add 10.$i.1.0/24 via 10.$i.2.1
	done
	for n in c s; do
		nsx $n sysctl -qw net.ipv4.tcp_no_metrics_save=1
	done
	[ $proto = mptcp ] || return 0
	for n in c s; do
		nsx $n sysctl -qw net.mptcp.enabled=1
		nsx $n ip mptcp limits set subflows 2 add_addr_accepted 2
	done
	nsx s ip mptcp endpoint add 10.2.2.2 dev s2 signal
}

teardown_topo() {
	for n in c s r1 r2; do ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null; ip netns del $n; done
}

# shape RATE on the router's egress to the client (server -> client), delay D each way.
set_links() {
	rates=$1 backend=$2; shift 2
	i=1
	for d in "$@"; do
		r=r$i
		rate=$(echo "$rates" | awk -F, -v i=$i '{print (NF >= i) ? $i : $1}')
		if [ "$backend" = netem ]; then
			nsx $r tc qdisc add dev rc root handle 1: netem delay "${d}ms" limit 100000
			nsx $r tc qdisc add dev rs root handle 1: netem delay "${d}ms" limit 100000
			parent="parent 1:1 handle 10:"
		else
			parent="root handle 10:"
		fi
		if [ "$rate" != 0 ]; then
			# burst 10 packets (or 1 ms), queue 100 ms of the rate (at least 30 KB)
			bytes_s=$((rate * 125000))
			burst=$((bytes_s / 1000)); [ $burst -lt 15140 ] && burst=15140
			limit=$((bytes_s / 10)); [ $limit -lt 30000 ] && limit=30000
			# a case's own queue limit and burst, in bytes (bench/uml/scenario.py passes a scenario's)
			[ "$qlimit" != 0 ] && limit=$qlimit
			[ "$qburst" != 0 ] && burst=$qburst
			# shellcheck disable=SC2086  # split on purpose: $parent is several tc words
			nsx $r tc qdisc add dev rc $parent tbf rate "${rate}mbit" burst $burst limit $limit
		fi
		if [ "$backend" = delayline ]; then
			printf '0 %d\n' $((d * 1000)) > /tmp/d$i.sched
			# iptables-nft, else iptables-legacy (Debian's UML kernel has no nf_tables ipv4 table)
			for q in "rs 1" "rc 2"; do
				# shellcheck disable=SC2086  # split on purpose: "DEVICE QUEUE"
				set -- $q
				nsx $r iptables -A FORWARD -i "$1" -j NFQUEUE --queue-num "$2" 2>/dev/null ||
					nsx $r iptables-legacy -A FORWARD -i "$1" -j NFQUEUE --queue-num "$2"
			done
			for q in 1 2; do
				nsx $r "$DL" --queue $q --schedule /tmp/d$i.sched \
					--ready-file /tmp/dl$i.$q.ready --stats "$O/$cname.dl$i.$q.json" &
			done
			n=0
			while [ ! -e /tmp/dl$i.1.ready ] || [ ! -e /tmp/dl$i.2.ready ]; do
				n=$((n + 1)); [ $n -gt 200 ] && { echo "$cname: delay line $i not ready" >> $O/errors.txt; break; }
				sleep 0.05
			done
		fi
		i=$((i + 1))
	done
}

cpu_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }

run_case() {
	cname=$1 sched=$2 rate=$3 d1=$4 d2=$5 backend=$6 secs=$7 trace=$8 qlimit=${9:-0} qburst=${10:-0}
	setup_topo
	set_links "$rate" "$backend" "$d1" "$d2"
	[ $proto = mptcp ] && nsx s sysctl -qw "net.mptcp.scheduler=$sched"
	# idle RTT per path (ICMP through the same qdiscs / delay line), before the transfer
	for i in 1 2; do
		# three pings first, not counted: the first packets wait for ARP on each hop, and netem
		# delays ARP too (measured: 161, 139, 109 ms against 80 ms, then 80.1-80.7)
		nsx c ping -n -q -c 3 -i 0.2 -I 10.$i.1.2 10.$i.2.2 > /dev/null 2>&1
		nsx c ping -n -c 100 -i 0.02 -I 10.$i.1.2 10.$i.2.2 2>&1 | \
			sed -n 's/.*time=\([0-9.]*\) ms/\1/p' > "$O/$cname.rtt$i.txt"
	done
	[ -e /sys/module/mptcp/parameters/mpv_trace ] && echo "$trace" > /sys/module/mptcp/parameters/mpv_trace
	# MPTCP: one connection (the server announces its path-2 address). Plain TCP (no MPTCP in
	# the guest kernel): one connection per path, at the same time.
	paths=1; [ $proto = tcp ] && paths=2
	spids='' cpids=''
	for i in $(seq $paths); do
		nsx s timeout $((secs + 90)) python3 "$D/xfer.py" server "10.$i.2.2" 5000 "$secs" \
			> "$O/$cname.server$i.txt" 2>&1 &
		spids="$spids $!"
	done
	for i in $(seq $paths); do
		n=0
		until grep -q ready "$O/$cname.server$i.txt" 2>/dev/null; do
			n=$((n + 1)); [ $n -gt 600 ] && { echo "$cname: server $i not ready" >> $O/errors.txt; break; }
			sleep 0.1
		done
	done
	echo "$cname xfer_start $(date +%s.%N)" >> $O/progress.txt
	b0=$(cpu_busy)
	for i in $(seq $paths); do
		nsx c timeout $((secs + 80)) python3 "$D/xfer.py" client "10.$i.2.2" 5000 \
			> "$O/$cname.client$i.json" 2>"$O/$cname.client$i.err" &
		cpids="$cpids $!"
	done
	# shellcheck disable=SC2086  # split on purpose: a list of pids (a bare `wait` would also wait for the delay lines)
	wait $cpids
	b1=$(cpu_busy)
	echo "$cname xfer_end $(date +%s.%N)" >> $O/progress.txt
	[ -e /sys/module/mptcp/parameters/mpv_trace ] && echo 0 > /sys/module/mptcp/parameters/mpv_trace
	# shellcheck disable=SC2086  # split on purpose: a list of pids
	wait $spids
	echo "$b0 $b1" > "$O/$cname.cpu.txt"
	nsx s nstat -saz TcpOutSegs TcpRetransSegs > "$O/$cname.nstat_s.txt"
	nsx c nstat -saz TcpOutSegs > "$O/$cname.nstat_c.txt"
	# MPTCP's own counters (joins, ADD_ADDR): whether the second subflow was ever made
	for n in c s; do nsx $n nstat -saz | grep '^MPTcp' > "$O/$cname.mptcp_$n.txt"; done
	nsx c ip mptcp limits show > "$O/$cname.pm_c.txt" 2>&1
	nsx c ip mptcp endpoint show >> "$O/$cname.pm_c.txt" 2>&1
	nsx s ip mptcp endpoint show >> "$O/$cname.pm_s.txt" 2>&1
	for i in 1 2; do nsx r$i tc -s qdisc show > "$O/$cname.tc$i.txt"; done
	sleep 0.5
	teardown_topo
	dmesg -c | grep 'mpvlab: ' > "$O/$cname.dmesg.txt"
	echo "$cname done $(date +%s.%N)" >> $O/progress.txt
}

dmesg -c > $O/dmesg.boot.txt
grep -v '^#' "$O/$MPV_CASES" | while read -r line; do
	# shellcheck disable=SC2086  # split on purpose: a case line is the 8 (or 10) fields run_case takes
	[ -n "$line" ] && run_case $line < /dev/null
done
echo "end_wall $(date +%s.%N)" >> $O/boot.txt
sync
poweroff -f -f 2>/dev/null || echo o > /proc/sysrq-trigger
