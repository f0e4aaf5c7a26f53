"""The scale-out tests: KV events, router metrics, the deployment manifests.

They run `drift serve` through the server tests' harness (tests/server/conftest.py: $DRIFT_BIN or
build/bin/drift, the default model), loaded here under its own name.
"""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "drift_server_harness", pathlib.Path(__file__).resolve().parents[1] / "server" / "conftest.py")
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)

ROOT = harness.ROOT
Server = harness.Server
free_port = harness.free_port
MODEL_NAME = harness.MODEL_NAME
