#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build (its CTest suite runs the Python tests
# on the build tree); the Python package installed with pip into a fresh virtual environment
# and its tests run again there; the threaded kernels under
# ThreadSanitizer; the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer;
# then each fuzz target for a bounded time (FUZZ_SECONDS, default 60; 0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=build bash scripts/build.sh
ctest --test-dir build --output-on-failure -j 2

# The Python package as users install it (pyproject.toml, no package index), tested from /.
repo=$(pwd)
venv=$(mktemp -d "${TMPDIR:-/tmp}/cumulus-venv.XXXXXX")
/usr/bin/python3 -m venv --system-site-packages "$venv"
CUMULUS_BUILD_DIR="$repo/build" "$venv/bin/pip" install --no-build-isolation --no-deps --no-index ./python
# pytest exits 5 when it collects no test: set -e fails the run then too.
(cd / && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/python/tests")
rm -rf "$venv"

cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUMULUS_TSAN=ON \
  -DCUMULUS_BUILD_BENCH=OFF -DCUMULUS_BUILD_PYTHON=OFF
cmake --build build-tsan --target test_ops test_properties test_model
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
build-tsan/tests/test_properties --gtest_filter='ThreadCount*:SumProperty*:LongScan*'
build-tsan/tests/test_ops --gtest_filter='LargeScans*'
build-tsan/tests/test_model --gtest_filter='*Concurrent*'

BUILD_DIR=build-asan bash scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUMULUS_SANITIZE=ON \
  -DCUMULUS_BUILD_PYTHON=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j 2

if [ "${FUZZ_SECONDS:-60}" != 0 ]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-60} bash scripts/fuzz.sh
fi
