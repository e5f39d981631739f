# Sourced by the benchmarks: start_etcd WORK CLIENT_PORT PEER_PORT starts a
# 3-member etcd on loopback (Debian's etcd-server; members unpinned), client
# ports CLIENT_PORT.. and peer ports PEER_PORT.., data and logs under WORK;
# waits until it is healthy. Sets etcd_endpoints (comma-separated) and
# appends the members' pids to etcd_pids.
start_etcd() {
  local work="$1" client="$2" peer="$3" cluster="" i
  etcd_endpoints=""
  for i in 0 1 2; do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((peer + i))"
    etcd_endpoints+="${etcd_endpoints:+,}http://127.0.0.1:$((client + i))"
  done
  for i in 0 1 2; do
    etcd --name "m$i" --data-dir "$work/etcd-$i" \
      --listen-client-urls "http://127.0.0.1:$((client + i))" \
      --advertise-client-urls "http://127.0.0.1:$((client + i))" \
      --listen-peer-urls "http://127.0.0.1:$((peer + i))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((peer + i))" \
      --initial-cluster "$cluster" --initial-cluster-state new --max-txn-ops 10000 \
      --log-level warn 2>"$work/etcd-$i.log" &
    etcd_pids+=($!)
  done
  for _ in $(seq 1 100); do
    ETCDCTL_API=3 etcdctl --endpoints "$etcd_endpoints" endpoint health >/dev/null 2>&1 && return
    sleep 0.2
  done
  echo "etcd did not become healthy: see $work/etcd-*.log" >&2
  return 1
}
