#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan; only
# the fuzz targets) and runs each from its seed corpus for a bounded time.
# docs/fuzzing.md describes the targets.
#
#   scripts/fuzz.sh                # UNIPOOL_FUZZ_SECONDS per target (default 20)
#   scripts/fuzz.sh 600            # ten minutes per target
#   scripts/fuzz.sh 600 trace      # only the named targets
#
# UNIPOOL_FUZZ_SECONDS=0 skips; UNIPOOL_FUZZ_JOBS (default 2) is the build's
# parallelism and how many targets run at once. New inputs a run finds are
# kept in build/fuzz/corpus/<name> (not the committed seeds), crashes in
# build/fuzz/artifacts/, each target's log in build/fuzz/logs/.
# Exit: 0 no crash; 1 a crash, leak, timeout or build failure; 2 bad usage; 77 skipped
# (no clang with libFuzzer, or 0 seconds): the `fuzz` test's SKIP_RETURN_CODE.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-${UNIPOOL_FUZZ_SECONDS:-20}}"
shift $(($# > 0 ? 1 : 0))
parallel="${UNIPOOL_FUZZ_JOBS:-2}"

skip() {
  echo "skipped: $*"
  exit 77
}

if [[ ! "$seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: seconds must be a whole number, got '$seconds'" >&2
  exit 2
fi
((seconds > 0)) || skip "UNIPOOL_FUZZ_SECONDS=0"
command -v clang++ >/dev/null || skip "no clang++ on PATH (the fuzz preset needs clang with libFuzzer)"
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' >"$probe/probe.cc"
clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" 2>/dev/null ||
  skip "clang++ cannot link -fsanitize=fuzzer,address,undefined (no libFuzzer runtime)"

if (($# > 0)); then
  targets=("$@")
else
  targets=()
  for source in fuzz/*_fuzz.cc; do
    name="${source#fuzz/}"
    targets+=("${name%_fuzz.cc}")
  done
fi

start=$SECONDS
echo "fuzz: building ${#targets[@]} targets (cmake --preset fuzz, -j$parallel)"
if ! cmake --preset fuzz >"$probe/configure.log" 2>&1; then
  cat "$probe/configure.log"
  exit 1
fi
if ! cmake --build --preset fuzz -j "$parallel" >"$probe/build.log" 2>&1; then
  grep -v -e 'unknown warning option' -e 'warnings\? generated' "$probe/build.log" | tail -n 60
  exit 1
fi
echo "fuzz: built in $((SECONDS - start)) s; running each target for $seconds s, $parallel at once"

out=build/fuzz
mkdir -p "$out/logs" "$out/artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

# Runs one target; its log and exit status say how it went.
run() {
  local name="$1" status=0
  local seeds=("fuzz/corpus/$name")
  [[ -d "fuzz/regressions/$name" ]] && seeds+=("fuzz/regressions/$name")
  mkdir -p "$out/corpus/$name"
  "$out/fuzz/${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/$name-" \
    "$out/corpus/$name" "${seeds[@]}" >"$out/logs/$name.log" 2>&1 || status=$?
  echo "$status" >"$out/logs/$name.status"
}

for name in "${targets[@]}"; do
  if [[ ! -x "$out/fuzz/${name}_fuzz" ]]; then
    echo "fuzz.sh: no target '$name' (see fuzz/*_fuzz.cc)" >&2
    exit 2
  fi
  rm -f "$out/logs/$name.status"
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  run "$name" &
done
wait

failed=0
for name in "${targets[@]}"; do
  log="$out/logs/$name.log"
  if [[ "$(cat "$out/logs/$name.status" 2>/dev/null)" == 0 ]]; then
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")"
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)"
    echo "fuzz: $name: ${runs:-?} inputs, ${rate:-?}/s, ${cov:-cov: ?}, no crash"
  else
    failed=1
    echo "fuzz: $name: FAILED; the end of $log:"
    tail -n 40 "$log" | sed 's/^/  /'
    input="$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)"
    echo "fuzz: $name: keep the input as a regression: cp ${input:-$out/artifacts/$name-...} fuzz/regressions/$name/NAME"
  fi
done
echo "fuzz: done in $((SECONDS - start)) s"
exit "$failed"
