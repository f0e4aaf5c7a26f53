#!/usr/bin/env bash
# drift's main job on the default model, on a fresh Debian 12 machine (set-up included): the
# OpenAI-compatible server in the foreground on http://127.0.0.1:8080 (Ctrl-C or SIGTERM drains
# and stops it). Extra arguments go to `drift serve` (e.g. --port 9000 --api-key KEY).
# scripts/setup.sh installs and builds only what serving needs (~10 min the first time on 2
# cores, seconds after that).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "[run] starting drift serve (the model loads in about a second; Ctrl-C stops it)" >&2
exec build/bin/drift serve "$@"
