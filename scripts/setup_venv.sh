#!/usr/bin/env bash
# The Python environment of the server's integration tests, the web page's browser tests and the
# load generator: a venv in the model cache (${DRIFT_CACHE:-~/.cache/drift}/venv) with pinned
# packages. Idempotent: a venv that already has exactly these versions is left alone. Prints the
# venv's python.
set -euo pipefail
VENV="${DRIFT_CACHE:-$HOME/.cache/drift}/venv"
# playwright drives Debian's chromium in the web page's tests (never a browser of its own);
# jsonschema validates structured output in the server's tests. nanobind builds the Python
# package's module in the release tree (-DDRIFT_PYTHON=ON); scikit-build-core is its build
# backend for `pip install ./python`; jinja2 renders chat templates in the package's tests.
# The scale-out tests (tests/scaleout): pyzmq and msgpack subscribe to the KV event stream,
# msgspec decodes it with vLLM's own struct definitions, prometheus-client parses /metrics as
# a router's scraper does, PyYAML loads the Kubernetes manifest.
REQUIREMENTS=(openai==3.51.0 httpx==0.28.1 pytest==9.2.0 playwright==1.65.2 jsonschema==4.26.0
              nanobind==3.1.0 scikit-build-core==1.1.2 jinja2==3.1.6
              pyzmq==27.3.0 msgpack==1.2.4 msgspec==0.22.0 prometheus-client==0.26.0
              PyYAML==6.0.4 anthropic==2.14.0)
STAMP="$VENV/.drift-requirements"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "${REQUIREMENTS[*]}" ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${REQUIREMENTS[@]}" >&2
  echo "${REQUIREMENTS[*]}" > "$STAMP"
fi
echo "$VENV/bin/python"
