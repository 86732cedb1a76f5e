# shellcheck shell=bash disable=SC2154  # bin and tmp are set by the sourcing script
# Shared by the bench scripts that measure through one crest-agent on the
# embedded mindie-sim (bench/slots/interference, bench/sim/busy-host). Source
# it after setting `bin` (the build's bin/ directory) and `tmp` (a scratch
# directory the caller removes).

# Exits 2 unless the binaries and jq are there; $1 names the caller.
bench_need() {
  local b
  for b in crest crest-agent mindie-sim npu-smi-sim; do
    [ -x "$bin/$b" ] || { echo "$1: $bin/$b is missing: run scripts/build first" >&2; exit 2; }
  done
  command -v jq >/dev/null || { echo "$1: needs jq (scripts/install-deps)" >&2; exit 2; }
}

# Starts crest-agent with $tmp/agent.yaml on a free loopback port; sets
# agent_pid and addr (host:port). $1 names the caller.
bench_start_agent() {
  "$bin/crest-agent" --listen 127.0.0.1:0 --state-dir "$tmp/state" --config "$tmp/agent.yaml" \
    --node-name bench --insecure >"$tmp/agent.log" 2>&1 &
  agent_pid=$!
  addr=
  for _ in $(seq 1 200); do
    addr=$(sed -n 's/.*serving NodeAgent on \([0-9.:]*\) .*/\1/p' "$tmp/agent.log" | head -1)
    [ -n "$addr" ] && break
    kill -0 "$agent_pid" 2>/dev/null || { cat "$tmp/agent.log" >&2; exit 1; }
    sleep 0.05  # polling the agent's log for its address: there is no other signal
  done
  [ -n "$addr" ] || { echo "$1: the agent did not start" >&2; cat "$tmp/agent.log" >&2; exit 1; }
}

# "mean min max CV%" of the numbers given.
bench_stats() {
  printf '%s\n' "$@" | awk '{s+=$1; q+=$1*$1; if(NR==1||$1<lo)lo=$1; if(NR==1||$1>hi)hi=$1}
    END{m=s/NR; v=q/NR-m*m; if(v<0)v=0; printf "%.1f %.1f %.1f %.2f", m, lo, hi, 100*sqrt(v)/m}'
}
