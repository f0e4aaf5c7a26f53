#!/usr/bin/env bash
# The Python environment of drift's Ray Serve tests and of `serve run drift.ray:build_app`
# (docs/scale-out.md): a venv of its own (${DRIFT_CACHE:-~/.cache/drift}/venv-ray), so that Ray's
# dependencies (pydantic, fastapi, grpcio, ...) never move the versions the main venv pins.
# Pinned packages; idempotent: a venv that already has exactly these versions is left alone.
# Prints the venv's python. Needs the same python3 as the main venv (the drift module is built
# for it).
set -euo pipefail
VENV="${DRIFT_CACHE:-$HOME/.cache/drift}/venv-ray"
REQUIREMENTS=("ray[serve]==2.60.0" openai==3.51.0 httpx==0.28.1 pytest==9.2.0)
STAMP="$VENV/.drift-requirements"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "${REQUIREMENTS[*]}" ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${REQUIREMENTS[@]}" >&2
  echo "${REQUIREMENTS[*]}" > "$STAMP"
fi
echo "$VENV/bin/python"
