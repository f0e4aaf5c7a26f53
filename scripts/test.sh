#!/usr/bin/env bash
# Runs every test of drift on a fresh Debian 12 machine (set-up included):
#   1. set-up (packages, both models, release build) — scripts/setup.sh
#   2. all tests of the release build (unit + model), via ctest
#   3. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#   3b. the engine, server and util unit tests under ThreadSanitizer (build-tsan/)
#   4. every libFuzzer target (GGUF reader, request JSON and schemas, chat templates, both
#      tokenizers) for $DRIFT_FUZZ_SECONDS each (default 20); scripts/run_fuzzers.sh runs longer
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${DRIFT_JOBS:-$(nproc)}"

DRIFT_MODELS=all scripts/setup.sh
export DRIFT_CACHE="${DRIFT_CACHE:-$HOME/.cache/drift}"

echo "== release tests" >&2
ctest --test-dir build --output-on-failure -j "$JOBS"

echo "== unit tests under ASan + UBSan" >&2
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDRIFT_SANITIZE=ON >/dev/null
cmake --build build-asan --target unit_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -L unit -j "$JOBS"

# Only the suites whose code shares state across threads: the engine worker and submitting
# threads (unit_engine), the I/O thread, prompt workers and engine callbacks (unit_server), the
# compute pool and the crash log (unit_util). The rest are single-threaded and ASan covers them;
# no model tests (TSan slows compute 5-15x). `time` shows the step's cost in CI's log.
echo "== engine, server and util unit tests under ThreadSanitizer" >&2
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDRIFT_TSAN=ON >/dev/null
time cmake --build build-tsan --target unit_engine unit_server unit_util
time TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -R '^unit_(engine|server|util)$' -j "$JOBS"

if [ -d tests/fuzz ]; then
  echo "== fuzzing every target for ${DRIFT_FUZZ_SECONDS:-20} s each" >&2
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDRIFT_FUZZ=ON >/dev/null
  cmake --build build-fuzz --target fuzzers
  scripts/run_fuzzers.sh build-fuzz "${DRIFT_FUZZ_SECONDS:-20}"
fi
