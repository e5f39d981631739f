#!/usr/bin/env bash
# The server benchmarks of docs/benchmarks.md: a fresh server and store on
# core 0, `unipool bench api` on core 1, 10,000 nodes heartbeating every 5 s.
#
#   bench/api.sh normal     # 20,000 submissions, then 20,000 GETs
#   bench/api.sh hostile    # the same beside slow, idle and listing attackers
#   bench/api.sh stored     # 100,000 submissions first, then normal and hostile
#   bench/api.sh heartbeats # 131,072 nodes (2^20 GPUs) heartbeating every 10 s
#                           # for 120 s, nothing else; --node-lease 60s
#
# STORE=etcd runs the server on a 3-member etcd on loopback (Debian's
# etcd-server; members unpinned) instead of SQLite.
#
# Run from the repository root after `cmake --build --preset release`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-normal}"
bin="$PWD/build/release/unipool"
work="$(mktemp -d)"
etcd_pids=()
trap 'kill "$server" "${etcd_pids[@]}" 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT

store=(--data "$work/data")
if [ "${STORE:-sqlite}" = etcd ]; then
  source bench/etcd.sh
  start_etcd "$work" 23790 23810
  store=(--store etcd --etcd-endpoints "$etcd_endpoints" --etcd-max-txn-ops 10000)
fi

cluster=bench/clusters/10k-nodes.yaml lease=30s
[ "$mode" = heartbeats ] && cluster=bench/clusters/131k-nodes.yaml lease=60s
"$bin" token create --file "$work/tokens.yaml" --name ops --role admin >"$work/admin.tok" 2>/dev/null
taskset -c 0 "$bin" server --cluster "$cluster" --node-lease "$lease" --tokens "$work/tokens.yaml" \
  "${store[@]}" --init --listen 127.0.0.1:0 --address-file "$work/addr" \
  --log-level warn 2>"$work/server.log" &
server=$!
for _ in $(seq 1 600); do [ -f "$work/addr" ] && break; sleep 0.1; done
export UNIPOOL_SERVER="$(cat "$work/addr")" UNIPOOL_TOKEN="$(cat "$work/admin.tok")"
load() { taskset -c 1 "$bin" bench api --heartbeat-nodes 10000 --heartbeat-every 5s "$@"; }

case "$mode" in
  normal) load --submits 20000 --gets 20000 ;;
  hostile) load --submits 20000 --gets 20000 --hostile ;;
  stored)
    load --submits 100000 --gets 1000
    load --submits 20000 --gets 20000
    load --submits 20000 --gets 20000 --hostile
    ;;
  heartbeats)
    taskset -c 1 "$bin" bench api --submits 0 --gets 0 --heartbeat-nodes 131072 \
      --heartbeat-every 10s --heartbeat-connections 128 --hold 120s
    ;;
  *) echo "usage: bench/api.sh normal|hostile|stored|heartbeats" >&2; exit 2 ;;
esac
grep VmHWM "/proc/$server/status"
