#!/usr/bin/env bash
# drift's main job on the default model, on a fresh Debian 12 machine (set-up included).
# Until the HTTP server lands this generates text from a prompt through the engine; extra
# arguments go to `drift generate` (e.g. -p "Once upon a time" -n 64).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -eq 0 ]; then
  set -- -p "The three most important ideas in computer science are" -n 64 --temp 0
fi
exec build/bin/drift generate "$@"
