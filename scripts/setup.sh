#!/usr/bin/env bash
# The serving set-up of a fresh Debian 12 machine, idempotent: the Debian packages that building
# and running `drift` needs, the default model, and the `drift` program in build/ (no tests, no
# Python module, no test venv, no browser: scripts/setup_test.sh adds those). Needs Rust's
# toolchain from rustup (Debian's is too old for llguidance) and says so at once if it is missing.
#
#   scripts/setup.sh          # what scripts/run.sh runs before `drift serve`
#
# A second run costs seconds: the packages are checked with one dpkg-query, the model by its
# sha256, and the build is ninja's no-op on the `drift` target (configure runs only when build/
# has never been configured; ninja re-runs CMake itself when a CMakeLists.txt changed).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup_lib.sh
export DRIFT_CACHE="${DRIFT_CACHE:-$HOME/.cache/drift}"

require_rust

install_packages "serving" 3 "${SERVE_PACKAGES[@]}"

# The model downloads while the program compiles; its log is shown if it fails.
[ -f "$DRIFT_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf" ] ||
  say "downloading the default model (SmolLM2-135M-Instruct Q4_1, 93 MB) in the background"
model_log=$(mktemp)
trap 'rm -f "$model_log"' EXIT
scripts/fetch_models.sh default 2>"$model_log" &
model_pid=$!

if [ ! -f build/build.ninja ]; then
  say "configuring build/ (Release)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDRIFT_BUILD_TESTS=OFF >/dev/null
fi
if [ ! -x build/bin/drift ]; then
  say "building drift: ~200 steps, ~8 min on an idle 2-core machine the first time (more on a" \
    "shared one); cargo builds llguidance (~2 min) alongside and lists its crates"
fi
cmake --build build --target drift
say "drift is built: build/bin/drift"

if ! wait "$model_pid"; then
  cat "$model_log" >&2
  exit 1
fi
say "model ready: $(tail -n 1 "$model_log" | sed 's/^fetch_models: //')"
