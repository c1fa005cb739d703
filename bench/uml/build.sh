#!/usr/bin/env bash
# Build a User-Mode Linux kernel (Debian's linux-source-6.12) with MPTCP, netns, veth, tc
# (tbf, netem, ingress/IFB), NFQUEUE, and the project's per-packet MPTCP schedulers
# (mpv_minrtt, mpv_bdp; sched_mpvlab.c + mpvlab-sched.patch) built in and registered at boot.
#
# Issue 50's go/no-go probe. Never run by CI or setup.sh: it takes tens of minutes on 2 cores.
# Everything (the .deb, the unpacked tree, the build) is cached outside the checkout, in
# $MPVLAB_UML_CACHE (default /var/cache/mpvlab/uml). Re-running is incremental.
#
#   bench/uml/build.sh            # -> $MPVLAB_UML_CACHE/build/linux (the UML binary)
#   MPVLAB_UML_JOBS=2 (default) ; always under nice -n 19 (the cores are shared)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${MPVLAB_UML_CACHE:-/var/cache/mpvlab/uml}
jobs=${MPVLAB_UML_JOBS:-2}
ver=6.12
src="$cache/linux-source-$ver"
out="$cache/build"

mkdir -p "$cache"
cd "$cache"
if ! command -v flex >/dev/null || ! command -v bison >/dev/null; then
	echo "build.sh: needs flex and bison (apt-get install flex bison)" >&2; exit 2
fi

if [ ! -d "$src" ]; then
	ls linux-source-"${ver}"_*.deb >/dev/null 2>&1 || apt-get download "linux-source-$ver"
	# the newest of the downloaded versions: Debian's names are plain (no spaces or newlines)
	deb=$(printf '%s\n' linux-source-"${ver}"_*.deb | sort -V | tail -1)
	dpkg-deb --fsys-tarfile "$deb" | tar -x "./usr/src/linux-source-$ver.tar.xz"
	nice -n 19 tar -xJf "usr/src/linux-source-$ver.tar.xz"
	rm -rf usr
fi

# The schedulers: one C file copied in, one patch for the glue (Makefile, boot registration,
# per-connection decision counters, one-skb decision granularity). Applied once (stamp).
cp "$here/sched_mpvlab.c" "$src/net/mptcp/sched_mpvlab.c"
if [ ! -e "$src/.mpvlab-patched" ]; then
	patch -d "$src" -p1 --forward < "$here/mpvlab-sched.patch"
	touch "$src/.mpvlab-patched"
fi

mkdir -p "$out"
if [ ! -e "$out/.config" ]; then
	nice -n 19 make -s -C "$src" ARCH=um SUBARCH=x86_64 O="$out" defconfig
fi
# Everything built in: no module loading inside the guest. The root is hostfs, so no block
# file systems; the cuts only shorten the build.
"$src/scripts/config" --file "$out/.config" \
	--disable MODULES \
	--enable MPTCP --disable MPTCP_IPV6 --disable IPV6 \
	--enable NET_NS --enable VETH --enable HOSTFS --enable TMPFS \
	--enable NET_SCHED --enable NET_SCH_TBF --enable NET_SCH_NETEM --enable NET_SCH_FQ \
	--enable NET_SCH_FQ_CODEL --enable NET_SCH_INGRESS --enable NET_CLS --enable NET_CLS_ACT \
	--enable NET_CLS_U32 --enable NET_CLS_MATCHALL --enable NET_ACT_MIRRED --enable IFB \
	--enable NETFILTER --enable NETFILTER_ADVANCED --enable NETFILTER_NETLINK \
	--enable NETFILTER_NETLINK_QUEUE --enable NF_TABLES --enable NF_TABLES_INET \
	--enable NF_TABLES_IPV4 --enable NFT_COMPAT --enable NFT_QUEUE \
	--enable NETFILTER_XTABLES --enable NETFILTER_XT_TARGET_NFQUEUE \
	--enable IP_NF_IPTABLES --enable IP_NF_FILTER \
	--enable TCP_CONG_ADVANCED --enable TCP_CONG_CUBIC --enable TCP_CONG_BBR \
	--enable INET_DIAG --enable INET_TCP_DIAG --enable INET_MPTCP_DIAG \
	--enable PROC_FS --enable SYSFS --enable DEVTMPFS \
	--disable DEBUG_INFO --disable DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT --enable DEBUG_INFO_NONE \
	--set-val LOG_BUF_SHIFT 23 \
	--disable EXT2_FS --disable EXT3_FS --disable EXT4_FS --disable QUOTA --disable AUTOFS_FS \
	--disable ISO9660_FS --disable BLK_DEV_UBD --disable BLK_DEV_LOOP --disable BLK_DEV_NBD \
	--disable WIRELESS --disable SOUND --disable UML_SOUND --disable FTRACE
nice -n 19 make -s -C "$src" ARCH=um SUBARCH=x86_64 O="$out" olddefconfig
for opt in MPTCP NET_NS VETH NET_SCH_TBF NET_SCH_NETEM NETFILTER_NETLINK_QUEUE NFT_QUEUE \
	NETFILTER_XT_TARGET_NFQUEUE HOSTFS IFB; do
	grep -q "^CONFIG_$opt=y" "$out/.config" || { echo "build.sh: CONFIG_$opt did not stick" >&2; exit 3; }
done
start=$(date +%s)
nice -n 19 make -s -C "$src" ARCH=um SUBARCH=x86_64 O="$out" -j"$jobs" linux
echo "build.sh: $out/linux built in $(( $(date +%s) - start )) s (-j$jobs, nice 19)"
