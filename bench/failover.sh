#!/usr/bin/env bash
# Failover with a big live state (docs/benchmarks.md, "Failover"): a
# 3-member etcd on loopback, two `unipool server --ha` on 10,000 nodes
# (--assume-nodes-up: no agents), JOBS submitted through the leader
# (default 100,000: 80,000 run, the rest wait), then the leader is killed
# (kill -9) ROUNDS times (default 3); each round prints how long until the
# other server's /readyz is 200, and the etcd database size. Between
# rounds, SETTLE seconds (default 40) let the restarted follower's mirror
# of the store catch up.
#
#   bench/failover.sh            # JOBS=100000 ROUNDS=3
#
# Run from the repository root after `cmake --build --preset release`.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-100000}" rounds="${ROUNDS:-3}"
bin="$PWD/build/release/unipool"
work="$(mktemp -d)"
pids=() etcd_pids=()
[ -n "${KEEP_LOGS:-}" ] && echo "logs in $work"
trap 'kill "${pids[@]}" "${etcd_pids[@]}" 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP_LOGS:-}" ] || rm -rf "$work"' EXIT

source bench/etcd.sh
start_etcd "$work" 23800 23820
endpoints="$etcd_endpoints"

"$bin" token create --file "$work/tokens.yaml" --name ops --role admin >"$work/admin.tok" 2>/dev/null
ports=(28460 28461)
server_pid=()
start() {  # start SERVER_INDEX
  "$bin" server --cluster bench/clusters/10k-nodes.yaml --assume-nodes-up \
    --tokens "$work/tokens.yaml" --store etcd --etcd-endpoints "$endpoints" \
    --etcd-max-txn-ops 10000 --ha --init --history "$work/history.db" \
    --listen "127.0.0.1:${ports[$1]}" --log-level "${LOG_LEVEL:-warn}" 2>>"$work/server-$1.log" &
  server_pid[$1]=$!
  pids+=($!)
}
ready() {  # the index of the server whose /readyz is 200, or nothing
  for i in 0 1; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[$i]}/readyz")" = 200 ] &&
      echo "$i" && return
  done
  true
}
start 0
for _ in $(seq 1 300); do [ -n "$(ready)" ] && break; sleep 0.1; done
start 1
export UNIPOOL_TOKEN="$(cat "$work/admin.tok")"
"$bin" bench api --server "http://127.0.0.1:${ports[0]}" --submits "$jobs" --gets 0 | grep submit
sleep 2
for r in $(seq 1 "$rounds"); do
  leader=""
  for _ in $(seq 1 600); do leader="$(ready)"; [ -n "$leader" ] && break; sleep 0.1; done
  [ -n "$leader" ] || { echo "round $r: no leader to kill" >&2; exit 1; }
  other=$((1 - leader))
  t0=$(date +%s.%N)
  kill -9 "${server_pid[$leader]}"
  for _ in $(seq 1 6000); do [ "$(ready)" = "$other" ] && break; sleep 0.02; done
  [ "$(ready)" = "$other" ] || { echo "round $r: no takeover in 2 minutes" >&2; tail -3 "$work"/server-*.log >&2; exit 1; }
  t1=$(date +%s.%N)
  live=$(curl -s -H "Authorization: Bearer $UNIPOOL_TOKEN" \
    "http://127.0.0.1:${ports[$other]}/v1/summary" | python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"]; print(sum(j.values()))')
  db=$(ETCDCTL_API=3 etcdctl --endpoints "$endpoints" endpoint status -w json |
    python3 -c 'import json,sys; print(max(m["Status"]["dbSize"] for m in json.load(sys.stdin)))')
  printf 'round %d: takeover %.2f s with %s live jobs; etcd db %.1f MiB\n' \
    "$r" "$(python3 -c "print($t1 - $t0)")" "$live" "$(python3 -c "print($db / 1048576)")"
  start "$leader" 2>/dev/null  # comes back as a follower
  # ...whose mirror of the store reads etcd whole first: give it time.
  [ "$r" = "$rounds" ] || sleep "${SETTLE:-40}"
done
