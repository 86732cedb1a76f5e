#!/usr/bin/env bash
# deploy/systemd: `systemd-analyze verify` (no running systemd needed) passes
# without a single warning, with the ExecStart binaries pointed at the build;
# the example environment files define every variable ExecStart uses; the
# agent's unit leaves writable what it must touch (sysfs, the MindIE dir, the
# daemon's log dirs under root's home) and lets it stop the daemon itself; the
# controller's exposure stays low.
# Misspelled directives are caught. Usage: systemd_units_test.sh SOURCE_DIR BIN_DIR
set -euo pipefail
src=${1:?usage: systemd_units_test.sh SOURCE_DIR BIN_DIR}
bin=${2:?usage: systemd_units_test.sh SOURCE_DIR BIN_DIR}
units=$src/deploy/systemd
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || fail "no systemd-analyze (Debian: systemd; run scripts/install-deps)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

verify() {  # UNIT-FILE: prints every complaint; fails on any
  local out
  out=$(systemd-analyze verify --man=no "$1" 2>&1) || { echo "$out"; return 1; }
  [ -z "$out" ] || { echo "$out"; return 1; }
}
for u in crest-agent crest-controller; do
  [ -x "$bin/$u" ] || fail "$bin/$u is not built"
  sed "s|/opt/crest/bin/|$bin/|" "$units/$u.service" >"$work/$u.service"
  verify "$work/$u.service" || fail "$u.service: systemd-analyze verify complained (above)"
  # Every ${VAR} / $VAR of ExecStart is set by the example environment file.
  for v in $(sed -n '/^ExecStart=/,/^[^ ]/p' "$units/$u.service" | grep -oE '\$\{?[A-Z_]+' | tr -d '${' | sort -u); do
    grep -qE "^$v=" "$units/$u.env" || fail "$u.service uses \$$v, which $u.env does not set"
  done
  grep -qx "EnvironmentFile=/etc/crest/$u.env" "$units/$u.service" || fail "$u.service: no EnvironmentFile"
  grep -qE '^Restart=(always|on-failure)$' "$units/$u.service" || fail "$u.service: no restart policy"
  grep -qx 'NoNewPrivileges=yes' "$units/$u.service" || fail "$u.service: NoNewPrivileges is not set"
done
echo "ok: both units verify cleanly; their environment files set every variable"

agent=$units/crest-agent.service
grep -qx 'KillMode=mixed' "$agent" || fail "crest-agent.service: the agent must get SIGTERM alone and stop the daemon itself"
grep -qx 'ProtectKernelTunables=yes' "$agent" && fail "crest-agent.service: ProtectKernelTunables makes /sys read-only"
grep -qx 'PrivateDevices=yes' "$agent" && fail "crest-agent.service: PrivateDevices hides the NPUs from the daemon"
grep -qx 'StateDirectory=crest-agent' "$agent" || fail "crest-agent.service: no state dir"
# Under ProtectSystem=strict only the state dir and the ReadWritePaths are
# writable, /root included: each path the agent and its daemon (root, the
# agent's child) write must be under one of them and exist before the sandbox
# is set up. The MindIE install is the one of docs/agent.md's example.
grep -qx 'ProtectSystem=strict' "$agent" || fail "crest-agent.service: ProtectSystem=strict is gone"
grep -qE '^ProtectHome=(yes|tmpfs)$' "$agent" && fail "crest-agent.service: ProtectHome hides /root, the daemon's log dirs"
writable() {  # UNIT PATH: PATH is under a ReadWritePaths= entry or the StateDirectory=
  local p
  for p in $(sed -n 's/^ReadWritePaths=//p' "$1") "/var/lib/$(sed -n 's/^StateDirectory=//p' "$1")"; do
    p=${p#-}
    p=${p%/}
    [[ "$2" == "$p" || "$2" == "$p"/* ]] && return 0
  done
  return 1
}
declare -A writes=(
  [/usr/local/Ascend/mindie/latest/mindie-service/conf/config.json]='config.json'
  [/var/lib/crest-agent/daemon.log]='the agent state dir'
  [/root/mindie/log/debug]="MindIE's logs"
  [/root/ascend/log/plog]="the CANN runtime's logs")
for path in "${!writes[@]}"; do
  writable "$agent" "$path" || fail "crest-agent.service: $path (${writes[$path]}) is read-only: no ReadWritePaths= covers it"
done
for dir in /root/mindie/log /root/ascend/log; do
  grep -qE "^ExecStartPre=\+\S*mkdir -p .*$dir( |$)" "$agent" ||
    fail "crest-agent.service: no ExecStartPre=+mkdir -p of $dir (ReadWritePaths= needs it to exist)"
done
sed 's|^ReadWritePaths=/root/mindie |ReadWritePaths=|' "$agent" >"$work/no-log.service"
cmp -s "$agent" "$work/no-log.service" && fail "the edit dropping /root/mindie changed nothing"
writable "$work/no-log.service" /root/mindie/log/debug && fail "writable() missed a dropped ReadWritePaths= entry"
grep -qE '^CapabilityBoundingSet=.*CAP_SYS_NICE' "$agent" || fail "crest-agent.service: pinning needs CAP_SYS_NICE"
grep -qE '^CapabilityBoundingSet=.*CAP_SYS_ADMIN' "$agent" && fail "crest-agent.service: CAP_SYS_ADMIN is not needed"
echo "ok: the agent can tune /sys, edit config.json, log, pin and stop the daemon, and no more"

exposure() { systemd-analyze security --offline=true "$1" 2>/dev/null | grep -oE 'exposure level for [^:]+: [0-9.]+' | awk '{print $NF}'; }
c=$(exposure "$work/crest-controller.service")
a=$(exposure "$work/crest-agent.service")
echo "systemd-analyze security --offline=true: crest-controller $c, crest-agent $a (0 best, 10 worst)"
awk -v c="$c" 'BEGIN { exit !(c != "" && c <= 2.0) }' || fail "crest-controller.service exposure ${c:-unknown} above 2.0"

# The check sees a misspelled directive and a bad value.
sed 's/^NoNewPrivileges=yes/NoNewPrivilegez=yes/' "$work/crest-agent.service" >"$work/typo.service"
verify "$work/typo.service" >"$work/typo.out" && fail "a misspelled directive passed"
grep -q "Unknown key 'NoNewPrivilegez'" "$work/typo.out" || fail "unexpected: $(cat "$work/typo.out")"
sed 's/^KillMode=mixed/KillMode=mixd/' "$work/crest-agent.service" >"$work/value.service"
verify "$work/value.service" >"$work/value.out" && fail "a bad KillMode passed"
grep -q "kill mode" "$work/value.out" || fail "unexpected: $(cat "$work/value.out")"
echo "PASS: systemd units"
