"""The drift package against the default model.

`drift` is imported from $PYTHONPATH: ctest points it at BUILD/python (the module the release
build makes); after `pip install ./python` the installed package is used. The `drift` program
(for comparisons) comes from $DRIFT_BIN or build/bin/drift. Engines get a small KV cache
(kv_mib) so that several fit in one test process.
"""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("DRIFT_CACHE", pathlib.Path.home() / ".cache" / "drift"))
DRIFT_BIN = os.environ.get("DRIFT_BIN", str(ROOT / "build" / "bin" / "drift"))
MODEL = os.environ.get("DRIFT_TEST_MODEL", str(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"))
ENGINE_OPTIONS = {"threads": 2, "kv_mib": 64}


@pytest.fixture(scope="session")
def llm():
    import drift

    engine = drift.LLM(MODEL, **ENGINE_OPTIONS)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def async_llm():
    import drift

    engine = drift.AsyncLLM(MODEL, **ENGINE_OPTIONS)
    yield engine
    engine.shutdown()
