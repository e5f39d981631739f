#!/usr/bin/env bash
# The server benchmarks of docs/benchmarks.md: a fresh server and store on
# core 0, `unipool bench api` on core 1, 10,000 nodes heartbeating every 5 s.
#
#   bench/api.sh normal     # 20,000 submissions, then 20,000 GETs
#   bench/api.sh hostile    # the same beside slow, idle and listing attackers
#   bench/api.sh stored     # 100,000 submissions first, then normal and hostile
#
# Run from the repository root after `cmake --build --preset release`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-normal}"
bin="$PWD/build/release/unipool"
work="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

"$bin" token create --file "$work/tokens.yaml" --name ops --role admin >"$work/admin.tok" 2>/dev/null
taskset -c 0 "$bin" server --cluster bench/clusters/10k-nodes.yaml --tokens "$work/tokens.yaml" \
  --data "$work/data" --init --listen 127.0.0.1:0 --address-file "$work/addr" \
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
