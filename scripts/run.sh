#!/usr/bin/env bash
# drift's main job on the default model, on a fresh Debian 12 machine (set-up included): the
# OpenAI-compatible server in the foreground on http://127.0.0.1:8080 (Ctrl-C or SIGTERM drains
# and stops it). Extra arguments go to `drift serve` (e.g. --port 9000 --api-key KEY).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/drift serve "$@"
