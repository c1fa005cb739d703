# shellcheck shell=bash
# Sourced by ./setup.sh: the system services that Debian packages setup.sh installs enable and start
# on their own (apache2, ssh, munge, slurmctld, slurmd). mpvlab never uses them as services: a run
# starts its own Apache, sshd, munged, slurmctld and slurmd, with their own configuration, inside its
# namespaces or test folder, and stops them. So setup.sh leaves none of them running or enabled that
# was not running or enabled before it ran, and never touches one that was.
# tests/test_setup_services.py runs these functions against a stand-in systemctl.

SETUP_SERVICES=(apache2 ssh munge slurmctld slurmd)
SYSTEMD_RUN_DIR=${SYSTEMD_RUN_DIR:-/run/systemd/system}   # present when systemd is PID 1
POLICY_RC_D=${POLICY_RC_D:-/usr/sbin/policy-rc.d}
declare -A SVC_ENABLED_BEFORE=() SVC_ACTIVE_BEFORE=()
SVC_OWN_POLICY=0

_svc_enabled() { systemctl is-enabled "$1" 2>/dev/null || true; }
_svc_active() {
  if [ -d "$SYSTEMD_RUN_DIR" ]; then systemctl is-active "$1" 2>/dev/null || true; else echo unknown; fi
}

# Before apt-get: what each service was, and a policy-rc.d that keeps invoke-rc.d from starting any
# service during the install (Debian's own mechanism; only when none is there already).
services_before_install() {
  local s
  for s in "${SETUP_SERVICES[@]}"; do
    SVC_ENABLED_BEFORE[$s]=$(_svc_enabled "$s")
    SVC_ACTIVE_BEFORE[$s]=$(_svc_active "$s")
  done
  if [ ! -e "$POLICY_RC_D" ]; then
    printf '#!/bin/sh\n# mpvlab setup.sh, while it installs packages: start no service\nexit 101\n' > "$POLICY_RC_D"
    chmod 755 "$POLICY_RC_D"
    SVC_OWN_POLICY=1
  fi
}

# After apt-get: remove our policy-rc.d; disable what the install enabled, stop what it started.
services_after_install() {
  local s
  if [ "$SVC_OWN_POLICY" = 1 ]; then rm -f "$POLICY_RC_D"; SVC_OWN_POLICY=0; fi
  for s in "${SETUP_SERVICES[@]}"; do
    if [ "$(_svc_active "$s")" = active ] && [ "${SVC_ACTIVE_BEFORE[$s]:-}" != active ]; then
      systemctl stop "$s" && echo "[setup] stopped $s (started by its package; runs start their own)"
    fi
    if [ "$(_svc_enabled "$s")" = enabled ] && [ "${SVC_ENABLED_BEFORE[$s]:-}" != enabled ]; then
      systemctl disable --quiet "$s" 2>/dev/null && echo "[setup] disabled $s (enabled by its package; runs start their own)"
    fi
  done
}
