"""A live `drift serve` and a headless Chromium driven by Playwright, for the web page's tests.

The browser is Debian's `chromium` (/usr/bin/chromium, or $DRIFT_CHROMIUM); Playwright never
downloads one of its own. Screenshots go to $DRIFT_WEBUI_OUTPUT (ctest: build/test-output/webui).
"""
import importlib.util
import os
import pathlib
import shutil
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The server harness of the API tests (tests/server/conftest.py), loaded under its own name.
_spec = importlib.util.spec_from_file_location("server_harness", ROOT / "tests" / "server" / "conftest.py")
server_harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server_harness)
Server = server_harness.Server

CHROMIUM = os.environ.get("DRIFT_CHROMIUM", "/usr/bin/chromium")
OUTPUT = pathlib.Path(os.environ.get("DRIFT_WEBUI_OUTPUT", ROOT / "build" / "test-output" / "webui"))
API_KEY = "webui-test-key"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def server():
    # A small KV cache (128 MiB, a few hundred pages) so that the page map shows its pages; 16
    # sequences at once. The API key makes the page ask for it.
    s = Server("--kv-mib", "128", "--parallel", "16", api_key=API_KEY)
    yield s
    code = s.stop()
    assert code == 0, f"drift serve exited with {code} after SIGTERM:\n{s.log_text()[-4000:]}"


@pytest.fixture(scope="module")
def browser_context():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup_test.sh installs Debian's chromium")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="drift-webui-profile-")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 860})
        context.set_default_timeout(20_000)
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context):
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    page.close()
    # Content-Security-Policy violations and script errors show up here.
    unexpected = [e for e in errors if "401" not in e and "net::ERR_ABORTED" not in e]
    assert not unexpected, f"errors in the page: {unexpected}"
