#!/usr/bin/env bash
# Runs each libFuzzer target of a -DDRIFT_FUZZ=ON build for SECONDS, seeded with its corpus.
# Any crash, leak or sanitizer report fails the run (libFuzzer exits non-zero).
#   scripts/run_fuzzers.sh BUILD_DIR [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: $0 BUILD_DIR [SECONDS]}
seconds=${2:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Seeds are copied so that new inputs found by the fuzzer never land in the source tree.
mkdir -p "$work/gguf"
cp tests/data/gguf/valid/*.gguf tests/data/gguf/malformed/*.gguf "$work/gguf/"
"$build/bin/fuzz_gguf" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/gguf" 2>&1 | tail -n 25
echo "fuzz_gguf: no findings in ${seconds} s"
