#!/usr/bin/env bash
# mpvlab setup: installs every system package, the pinned Python environment (.venv), builds the
# native parts (delay line, BPF programs, preload shim) and generates the video content the shipped
# scenarios use. Idempotent and fast when nothing changed. Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (the platform creates namespaces, qdiscs, BPF objects)"
command -v apt-get >/dev/null || die "needs a Debian-based system (apt-get)"

# --- 1. system packages ----------------------------------------------------------------------
# Each group: why, then the packages. Printed before anything is installed (only what is missing).
DEB_GROUPS=(
  "emulation: namespaces, routing, shaping, firewall/NFQUEUE, Mininet|iproute2 iptables ethtool mininet net-tools procps tcpdump curl iputils-ping"
  "physical hosts over SSH: the client (ssh) and the sshd a run or test starts in its own namespace; the ssh service is left stopped and disabled|openssh-server openssh-client"
  "MPTCP for unmodified programs|mptcpize libmptcpwrap0"
  "the video server and player: each run starts its own Apache with its own configuration (the apache2 service is left stopped and disabled), GStreamer, FFmpeg for the content|apache2 gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 ffmpeg"
  "HTTPS / HTTP/2 (scenario server:): per-run certificates, libsoup 3 (HTTP/2) with GLib's TLS backend|openssl libsoup-3.0-0 glib-networking"
  "native builds: the delay line (libnetfilter-queue), the BPF programs (clang, libbpf, bpftool)|build-essential pkg-config clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libnetfilter-queue-dev libmnl-dev"
  "the Python environment (.venv with Debian's PyGObject and Mininet visible)|python3 python3-venv python3-dev"
  "cross traffic and comparisons (iperf3), mpvlab shell's iperf command (iperf 2)|iperf3 iperf"
  "player kind dashjs (dash.js in headless Chromium) and the HTML report's headless check|chromium"
  "sweeps on a Slurm cluster (docs/cluster.md): client tools, controller, node daemon, munge; tests/test_slurm.py starts its own one-node Slurm; the munge, slurmctld and slurmd services are left stopped and disabled|slurm-wlm slurmctld slurmd slurm-client munge"
  "a run's CPU by process and step (bench/bench_run_cost.py --ledger: perf record -e task-clock)|linux-perf"
  "the shell-script gate in CI and before a commit (tests/lintlab.py, .pre-commit-config.yaml)|shellcheck"
)
DEB_PACKAGES=()
missing=()
declare -A WHY=()
for g in "${DEB_GROUPS[@]}"; do
  read -r -a pkgs <<< "${g#*|}"
  for p in "${pkgs[@]}"; do
    DEB_PACKAGES+=("$p")
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
      WHY[${g%%|*}]+="$p "
    fi
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${#missing[@]} Debian packages, and why:"
  for g in "${DEB_GROUPS[@]}"; do
    [ -n "${WHY[${g%%|*}]:-}" ] && printf '  - %s\n      %s\n' "${g%%|*}" "${WHY[${g%%|*}]% }"
  done
  say "services these packages would enable and start (apache2, ssh, munge, slurmctld, slurmd) are kept"
  say "from starting, and left disabled unless they were enabled before (runs start their own)"
  # shellcheck source=setup-services.sh
  source "$ROOT/setup-services.sh"
  services_before_install
  trap services_after_install EXIT    # also if apt-get fails: our policy-rc.d never stays behind
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -q
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
  trap - EXIT
  services_after_install
else
  say "Debian packages: all ${#DEB_PACKAGES[@]} present"
fi

# --- 2. Python environment -------------------------------------------------------------------
# From Debian's /usr/bin/python3 (3.11) with system site-packages: the player needs Debian's `gi`
# and the topologies need Debian's `mininet`, neither of which is on PyPI in a usable form.
VENV=$ROOT/.venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import gi, mininet' 2>/dev/null; then
  say "creating $VENV from /usr/bin/python3 (with system site-packages)"
  rm -rf "$VENV"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
stamp=$VENV/.requirements.sha256
want=$(sha256sum requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing pinned Python packages (requirements.txt)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r requirements.txt
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
else
  say "Python packages: up to date"
fi
"$VENV/bin/python" -c 'import gi, mininet, pydantic, yaml, rich, pandas, mpvlab' \
  || die "the Python environment is incomplete"
# Bytecode of the project's own modules. pip compiles what it installs, but the editable install
# leaves the repository's sources uncompiled, and where PYTHONDONTWRITEBYTECODE is set (shared hosts
# often set it) every `mpvlab run` and every helper interpreter it starts compiled its ~120 modules
# again: ~0.13 CPU-s of each run's fixed cost (docs/cost.md, "A run's fixed cost"). Python checks
# a .pyc against its source's mtime and size and ignores a stale one, so this is only ever a cache.
"$VENV/bin/python" -m compileall -q -j0 mpvlab >/dev/null || die "compiling the project's Python modules failed"

# --- 2b. dash.js (player kind dashjs) ---------------------------------------------------------
# The dash.js reference player, pinned to the release line of the BBR-S study's era (Chrome 80, early
# 2020: dash.js 3.0.x; player/README.md says why), fetched with npm's own client and checked against
# the registry's sha512 integrity before its dist/ bundle is unpacked into player/dashjs/vendor/.
DASHJS_VERSION=3.0.3
DASHJS_INTEGRITY=sha512-K5hnf9aEaGpC9AwWSFgxeENFjomVYHX88O5+ADbUTr2THd2GBKBC1v4Z9ERkXgVK+bNMFhRJYT4jOdR91g73bg==
DASHJS_DIR=$ROOT/player/dashjs/vendor
if [ "$(cat "$DASHJS_DIR/.version" 2>/dev/null)" != "$DASHJS_VERSION" ]; then
  if ! command -v npm >/dev/null; then
    say "installing npm (Debian) to fetch dash.js"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends npm
  fi
  say "fetching dash.js $DASHJS_VERSION from the npm registry"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "dashjs@$DASHJS_VERSION" >/dev/null) || die "npm pack dashjs@$DASHJS_VERSION failed"
  got="sha512-$(openssl dgst -sha512 -binary "$tmp/dashjs-$DASHJS_VERSION.tgz" | base64 -w0)"
  [ "$got" = "$DASHJS_INTEGRITY" ] || die "dash.js $DASHJS_VERSION: integrity $got is not the pinned $DASHJS_INTEGRITY"
  mkdir -p "$DASHJS_DIR"
  tar -xzf "$tmp/dashjs-$DASHJS_VERSION.tgz" -C "$tmp" package/dist/dash.all.min.js package/package.json package/LICENSE.md 2>/dev/null \
    || tar -xzf "$tmp/dashjs-$DASHJS_VERSION.tgz" -C "$tmp" package/dist/dash.all.min.js package/package.json
  cp "$tmp/package/dist/dash.all.min.js" "$tmp/package/package.json" "$DASHJS_DIR/"
  [ -f "$tmp/package/LICENSE.md" ] && cp "$tmp/package/LICENSE.md" "$DASHJS_DIR/"
  rm -rf "$tmp"
  echo "$DASHJS_VERSION" > "$DASHJS_DIR/.version"
else
  say "dash.js $DASHJS_VERSION: present"
fi

# --- 3. native parts -------------------------------------------------------------------------
for dir in links/delayline links/delayline/xdp links/ecnmark cc cc/preload collectors schedulers rtp; do
  if [ -f "$dir/Makefile" ]; then
    say "building $dir"
    make -s -C "$dir"
  fi
done

# --- 4. video content for the shipped scenarios (deterministic, cached under .cache/content) --
# Only what the README's run command and the tests play; other scenarios' content (e.g. the DASH
# study's 11 × 10 min ladder, minutes to encode) is made on first use by `mpvlab run` / `sweep`.
say "preparing video content for the smoke and Wi-Fi/LTE scenarios (cache: /var/cache/mpvlab/content)"
"$VENV/bin/mpvlab" prepare scenarios/smoke.yaml scenarios/wifi-lte-*.yaml scenarios/dash-h2-short.yaml \
  scenarios/sabre-shared-short.yaml scenarios/bbrs-dash-own-short.yaml scenarios/sabre-own-short.yaml

say "done. Try: .venv/bin/mpvlab run scenarios/smoke.yaml"
