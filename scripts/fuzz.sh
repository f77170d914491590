#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (AddressSanitizer + UndefinedBehaviorSanitizer)
# into build-fuzz and runs each for a bounded time. Exits non-zero on any finding and prints the
# path of the input that shows it. Needs what scripts/setup.sh installs (clang, libclang-rt-14-dev).
#
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_TARGETS   targets to run (default: all four)
#   FUZZ_WORK_DIR  scratch folder for the new corpus, the findings and the logs
#                  (default: a new folder under /tmp); never the repository
#   FUZZ_BUILD_DIR build folder (default: build-fuzz)
# Extra arguments go to every libFuzzer run: flags such as -max_len=65536, or more folders of
# inputs to read (a corpus kept from an earlier run).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
read -r -a targets <<<"${FUZZ_TARGETS:-fuzz_model fuzz_tensor_proto fuzz_npy fuzz_ops}"
work=${FUZZ_WORK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/cumulus-fuzz.XXXXXX")}
mkdir -p "$work"
work=$(cd "$work" && pwd)
case "$work/" in
  "$(pwd)/"*)
    echo "error: FUZZ_WORK_DIR ($work) is inside the repository; use a scratch folder" >&2
    exit 2
    ;;
esac

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DCUMULUS_FUZZ=ON -DCUMULUS_BUILD_TESTS=OFF \
  -DCUMULUS_BUILD_BENCH=OFF
cmake --build "$build_dir" --target "${targets[@]}"

# Read-only seed folders: the hand-made seeds, the bundled examples, the conformance data.
node_tests=../shared/onnx-node-tests
debian_tests=(/usr/share/libonnx-testdata/data/node/test_cumsum* /usr/share/libonnx-testdata/data/node/test_sum_*)
seed_dirs() {
  local target=$1
  echo "fuzz/seeds/$target"
  case "$target" in
    fuzz_model | fuzz_tensor_proto)
      [ "$target" = fuzz_model ] && echo examples
      [ -d "$node_tests" ] && echo "$node_tests"
      for d in "${debian_tests[@]}"; do [ -d "$d" ] && echo "$d"; done
      ;;
    fuzz_npy) echo examples ;;
  esac
  return 0
}

# Readable stack traces need llvm-symbolizer; Debian's llvm-14 has it outside PATH.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null &&
  [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
# Leak checking stays on; UBSan reports abort so libFuzzer saves the input.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for target in "${targets[@]}"; do
  corpus="$work/corpus/$target"
  artifacts="$work/artifacts/$target"
  log="$work/logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$work/logs"
  mapfile -t seeds < <(seed_dirs "$target")
  dict=()
  [ -f "fuzz/$target.dict" ] && dict=("-dict=fuzz/$target.dict")
  echo "== $target: ${seconds}s; corpus $corpus; log $log"
  status=0
  # The first folder receives the new inputs; the seed folders are only read.
  nice -n 19 "$build_dir/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" \
    "$corpus" "${seeds[@]}" "$@" >"$log" 2>&1 || status=$?
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|Done )' \
    "$log" || true
  if [ "$status" -ne 0 ] || [ -n "$(ls -A "$artifacts")" ]; then
    echo "FINDING in $target (exit status $status); last lines of $log:" >&2
    tail -n 40 "$log" >&2
    for f in "$artifacts"/*; do
      [ -e "$f" ] && echo "reproducer: $f" >&2
    done
    failed+=("$target")
  fi
done

echo "work folder: $work"
if [ "${#failed[@]}" -ne 0 ]; then
  echo "findings in: ${failed[*]} (see fuzz/README.md to turn them into regression tests)" >&2
  exit 1
fi
echo "no findings"
