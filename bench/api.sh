#!/usr/bin/env bash
# The server benchmarks of docs/benchmarks.md: a fresh server and store on
# core 0, `unipool bench api` on core 1, 10,000 nodes heartbeating every 5 s.
#
#   bench/api.sh normal     # 20,000 submissions, then 20,000 GETs
#   bench/api.sh hostile    # the same beside slow, idle and listing attackers
#   bench/api.sh stored     # 100,000 submissions first, then normal and hostile
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
  cluster="" endpoints=""
  for i in 0 1 2; do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((23810 + i))"
    endpoints+="${endpoints:+,}http://127.0.0.1:$((23790 + i))"
  done
  for i in 0 1 2; do
    etcd --name "m$i" --data-dir "$work/etcd-$i" \
      --listen-client-urls "http://127.0.0.1:$((23790 + i))" \
      --advertise-client-urls "http://127.0.0.1:$((23790 + i))" \
      --listen-peer-urls "http://127.0.0.1:$((23810 + i))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((23810 + i))" \
      --initial-cluster "$cluster" --initial-cluster-state new --max-txn-ops 10000 \
      --log-level warn 2>"$work/etcd-$i.log" &
    etcd_pids+=($!)
  done
  for _ in $(seq 1 100); do
    ETCDCTL_API=3 etcdctl --endpoints "$endpoints" endpoint health >/dev/null 2>&1 && break
    sleep 0.2
  done
  store=(--store etcd --etcd-endpoints "$endpoints" --etcd-max-txn-ops 10000)
fi

"$bin" token create --file "$work/tokens.yaml" --name ops --role admin >"$work/admin.tok" 2>/dev/null
taskset -c 0 "$bin" server --cluster bench/clusters/10k-nodes.yaml --tokens "$work/tokens.yaml" \
  "${store[@]}" --init --listen 127.0.0.1:0 --address-file "$work/addr" \
  --log-level warn 2>"$work/server.log" &
server=$!
for _ in $(seq 1 100); do [ -f "$work/addr" ] && break; sleep 0.1; done
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
  *) echo "usage: bench/api.sh normal|hostile|stored" >&2; exit 2 ;;
esac
grep VmHWM "/proc/$server/status"
