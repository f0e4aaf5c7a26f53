#!/usr/bin/env bash
# The Python environment of the server's integration tests and the load generator: a venv in the
# model cache (${DRIFT_CACHE:-~/.cache/drift}/venv) with pinned packages. Idempotent: a venv that
# already has exactly these versions is left alone. Prints the venv's python.
set -euo pipefail
VENV="${DRIFT_CACHE:-$HOME/.cache/drift}/venv"
REQUIREMENTS=(openai==3.51.0 httpx==0.28.1 pytest==9.2.0 jsonschema==4.26.0)
STAMP="$VENV/.drift-requirements"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "${REQUIREMENTS[*]}" ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${REQUIREMENTS[@]}" >&2
  echo "${REQUIREMENTS[*]}" > "$STAMP"
fi
echo "$VENV/bin/python"
