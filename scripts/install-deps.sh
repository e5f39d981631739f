#!/usr/bin/env bash
# Installs every Debian 12 package unipool needs to build and test.
# Idempotent: packages already present are skipped; safe to run again.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  libcpp-httplib-dev libmicrohttpd-dev libsqlite3-dev libssl-dev
  prometheus wrk
  python3 python3-torch
  bubblewrap busybox-static   # the container tests: a runtime and an image's shell
  etcd-server etcd-client     # --store etcd, `unipool up --ha` and their tests
  chromium chromium-driver python3-selenium   # the web dashboard's browser tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
