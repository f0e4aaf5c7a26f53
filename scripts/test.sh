#!/usr/bin/env bash
# Runs every test of drift on a fresh Debian 12 machine (set-up included):
#   1. set-up (packages, both models, the venv, the release tree) — scripts/setup_test.sh, and
#      the size rules (scripts/check_sizes.py, ~2 s)
#   2. all tests of the release build (unit + model + the pytest suites), via ctest
#   3. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#   4. the engine, server and util unit tests under ThreadSanitizer (build-tsan/)
#   5. every libFuzzer target (GGUF reader, request JSON and schemas, chat templates, both
#      tokenizers, JSON inside string fields, grammars) for $DRIFT_FUZZ_SECONDS each (default
#      20); scripts/run_fuzzers.sh runs longer
# The sanitizer and fuzz trees build in the background, at low priority, while the release
# tests run: those spend much of their time waiting on servers and sockets, and the builds fill
# that idle CPU. Each tree builds only the targets its tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup_lib.sh
JOBS="${DRIFT_JOBS:-$(nproc)}"

scripts/setup_test.sh
export DRIFT_CACHE="${DRIFT_CACHE:-$HOME/.cache/drift}"
SAY_PREFIX=test

# The sanitizer and fuzz trees compile the code under test with -O1 and line tables only (-g1),
# not RelWithDebInfo's -O2 -g, and the tests' own sources at -O0 (tests/CMakeLists.txt): a unit
# test of the server costs 108 s of CPU under ASan+UBSan at -O2 -g, 56 s at -O1 -g1, 25 s at -O0
# -g1. -O1 is what the sanitizers' own documentation advises; line tables are all a report's
# stack trace needs.
SANITIZER_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
say "configuring build-asan/, build-tsan/ and build-fuzz/"
cmake -S . -B build-asan -G Ninja "${SANITIZER_FLAGS[@]}" -DDRIFT_SANITIZE=ON >/dev/null
cmake -S . -B build-tsan -G Ninja "${SANITIZER_FLAGS[@]}" -DDRIFT_TSAN=ON >/dev/null
if [ -d tests/fuzz ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja "${SANITIZER_FLAGS[@]}" -DDRIFT_FUZZ=ON \
    >/dev/null
fi

# The three trees build in the background at the lowest priority while the release tests run:
# those spend much of their time waiting on servers, sockets and sleeps, and the builds take
# that idle CPU without slowing the tests much. Each tree builds only what its tests run: every
# unit test (ASan), the suites whose code crosses threads (TSan), the fuzzers.
logs=$(mktemp -d)
build_trees() {
  set -e
  nice -n 19 cmake --build build-asan --target unit_tests -- -j"$JOBS"
  nice -n 19 cmake --build build-tsan --target unit_engine unit_server unit_util -- -j"$JOBS"
  [ ! -d tests/fuzz ] || nice -n 19 cmake --build build-fuzz --target fuzzers -- -j"$JOBS"
}
say "building the sanitizer and fuzz trees in the background (log: $logs/trees)"
set -m  # its own process group, so that an early exit stops its compilers too
build_trees >"$logs/trees" 2>&1 &
trees_pid=$!
set +m
trap 'kill -- -"$trees_pid" 2>/dev/null || true; rm -rf "$logs"' EXIT

failed=()
say "== sizes (scripts/check_sizes.py: files over 800 lines, functions over 100)"
python3 scripts/check_sizes.py || failed+=("sizes")
say "== release tests (ctest -j$JOBS: unit, model and the pytest suites)"
ctest --test-dir build --output-on-failure -j "$JOBS" || failed+=("release tests")

say "waiting for the sanitizer and fuzz trees"
if ! wait "$trees_pid"; then
  tail -n 100 "$logs/trees" >&2
  say "building the sanitizer and fuzz trees failed"
  exit 1
fi
say "sanitizer and fuzz trees built"

say "== unit tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -L unit -j "$JOBS" || failed+=("ASan+UBSan")

# Only the suites whose code shares state across threads: the engine worker and submitting
# threads (unit_engine), the I/O thread, prompt workers and engine callbacks (unit_server), the
# compute pool and the crash log (unit_util). The rest are single-threaded and ASan covers them;
# no model tests (TSan slows compute 5-15x).
say "== engine, server and util unit tests under ThreadSanitizer"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -R '^unit_(engine|server|util)$' -j "$JOBS" ||
  failed+=("TSan")

# Each fuzzer is one single-threaded process: two run at a time, one per core.
if [ -d tests/fuzz ]; then
  seconds=${DRIFT_FUZZ_SECONDS:-20}
  say "== fuzzing every target for $seconds s each, two at a time"
  scripts/run_fuzzers.sh build-fuzz "$seconds" fuzz_tokenizer fuzz_json_fields fuzz_grammar \
    >"$logs/fuzz2" 2>&1 &
  fuzz_pid=$!
  scripts/run_fuzzers.sh build-fuzz "$seconds" fuzz_gguf fuzz_request_json fuzz_jinja ||
    failed+=("fuzzing")
  wait "$fuzz_pid" || failed+=("fuzzing (tokenizers, JSON fields, grammars)")
  cat "$logs/fuzz2"
fi

if [ ${#failed[@]} -gt 0 ]; then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "all tests passed"
