#!/usr/bin/env bash
# Runs each libFuzzer target of a -DDRIFT_FUZZ=ON build for SECONDS, seeded with its corpus:
#   fuzz_gguf          the GGUF reader            tests/data/gguf/{valid,malformed}
#   fuzz_request_json  request JSON + schemas     tests/fuzz/corpus/request_json
#   fuzz_jinja         chat templates (sandboxed) tests/data/templates (+ a conversation)
#   fuzz_tokenizer     both models' tokenizers    tests/data/tokenizer/corpus (needs the models)
#   fuzz_json_fields   JSON inside string fields  tests/fuzz/corpus/json_fields
#   fuzz_grammar       grammar front ends         tests/fuzz/corpus/grammar (needs SmolLM2)
# Any crash, leak, hang (one input running 120 s: generous, because a loaded virtual machine
# was seen to stall a process for 50 s on an input that takes 0.1 s) or sanitizer report fails
# the run (libFuzzer exits non-zero).
#   scripts/run_fuzzers.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]
# CI runs every target for a short time (scripts/test.sh); run longer by hand, e.g. 3600.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: $0 BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]}
seconds=${2:-60}
shift $(($# < 2 ? $# : 2))
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
  targets=(fuzz_gguf fuzz_request_json fuzz_jinja fuzz_tokenizer fuzz_json_fields fuzz_grammar)
cache="${DRIFT_CACHE:-$HOME/.cache/drift}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts="${DRIFT_FUZZ_ARTIFACTS:-$build/fuzz-artifacts}"  # crashing inputs are kept here
mkdir -p "$artifacts"

# fuzz NAME SEED_DIR MAX_LEN [ENV=VALUE...]: seeds are copied so that new inputs the fuzzer finds
# never land in the source tree.
fuzz() {
  local name=$1 seeds=$2 max_len=$3
  shift 3
  echo "== $name for ${seconds} s" >&2
  if ! env "$@" "$build/bin/${name%%@*}" -max_total_time="$seconds" -max_len="$max_len" \
    -timeout=120 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$name-" \
    "$seeds" >"$work/$name.log" 2>&1; then
    cat "$work/$name.log"
    echo "$name: FAILED; the input is in $artifacts/" >&2
    return 1
  fi
  tail -n 8 "$work/$name.log"
  echo "$name: no findings in ${seconds} s"
}

for target in "${targets[@]}"; do
  case $target in
    fuzz_gguf)
      mkdir -p "$work/gguf"
      cp tests/data/gguf/valid/*.gguf tests/data/gguf/malformed/*.gguf "$work/gguf/"
      fuzz fuzz_gguf "$work/gguf" 4096
      ;;
    fuzz_request_json)
      mkdir -p "$work/request_json"
      cp tests/fuzz/corpus/request_json/* "$work/request_json/"
      fuzz fuzz_request_json "$work/request_json" 4096
      ;;
    fuzz_jinja)
      # Each real template, then NUL, then a conversation (the input format of jinja_fuzz.cc).
      mkdir -p "$work/jinja"
      messages='[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},'
      messages+='{"role":"assistant","content":"Hello.","tool_calls":[]},{"role":"user","content":"Bye"}]'
      for t in tests/data/templates/*.jinja; do
        { cat "$t"; printf '\0%s' "$messages"; } >"$work/jinja/$(basename "$t" .jinja)"
      done
      fuzz fuzz_jinja "$work/jinja" 16384
      ;;
    fuzz_tokenizer)
      for model in SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m; do
        if [ ! -f "$cache/$model.gguf" ]; then
          echo "fuzz_tokenizer: $cache/$model.gguf missing (scripts/fetch_models.sh); skipped" >&2
          continue
        fi
        mkdir -p "$work/tokenizer-$model"
        cp tests/data/tokenizer/corpus/* "$work/tokenizer-$model/"
        fuzz "fuzz_tokenizer@$model" "$work/tokenizer-$model" 4096 \
          DRIFT_FUZZ_TOKENIZER_GGUF="$cache/$model.gguf"
      done
      ;;
    fuzz_json_fields)
      mkdir -p "$work/json_fields"
      cp tests/fuzz/corpus/json_fields/* "$work/json_fields/"
      fuzz fuzz_json_fields "$work/json_fields" 65536
      ;;
    fuzz_grammar)
      model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
      if [ ! -f "$model" ]; then
        echo "fuzz_grammar: $model missing (scripts/fetch_models.sh); skipped" >&2
        continue
      fi
      mkdir -p "$work/grammar"
      cp tests/fuzz/corpus/grammar/* "$work/grammar/"
      fuzz fuzz_grammar "$work/grammar" 8192 DRIFT_FUZZ_TOKENIZER_GGUF="$model"
      ;;
    *)
      echo "unknown fuzz target: $target" >&2
      exit 2
      ;;
  esac
done
