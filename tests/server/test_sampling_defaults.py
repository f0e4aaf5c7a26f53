"""The server's sampling defaults: llama.cpp's unless the flags (or --sampling-defaults openai)
say otherwise, shown by the ready line and /v1/models; a request's own fields always win."""
import httpx

from conftest import MODEL_NAME, Server

PROMPT = "Once upon a time"


def defaults_of(server):
    models = httpx.get(server.url + "/v1/models", timeout=10).json()
    d = models["data"][0]["sampling_defaults"]
    return {k: (v["value"], v["source"]) if isinstance(v, dict) else v for k, v in d.items()}


def test_no_flags_llama_cpp_defaults_in_models_and_ready_line(server):
    d = defaults_of(server)
    assert d["base"] == "model"
    assert d["temperature"] == (0.8, "llama.cpp")
    assert d["top_k"] == (40, "llama.cpp")
    assert d["top_p"] == (0.95, "llama.cpp")
    assert d["min_p"] == (0.05, "llama.cpp")
    assert d["order"] == ("top_k;top_p;min_p;temperature", "llama.cpp")
    ready = [l for l in server.log_text().splitlines() if "drift serve: ready" in l]
    want = "sampling defaults (model): temperature 0.8 (llama.cpp), top_k 40 (llama.cpp)"
    assert ready and want in ready[0], ready


def test_flags_set_the_defaults_and_a_requests_fields_win():
    s = Server("--kv-mib", "64", "--temp", "0", "--top-k", "0")
    try:
        d = defaults_of(s)
        assert d["temperature"] == (0.0, "configured")
        assert d["top_k"] == (0, "configured")  # 0: no limit
        assert d["top_p"] == (0.95, "llama.cpp")
        client = s.client()

        def text(**kw):
            return client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=16,
                                             **kw).choices[0].text
        # No temperature in the request: the server's --temp 0, i.e. greedy, whatever the seed.
        assert text(seed=1) == text(seed=2) == text(temperature=0)
        # The request's own temperature wins over the server's.
        assert len({text(temperature=1.0, seed=k) for k in range(1, 5)}) > 1
    finally:
        assert s.stop() == 0


def test_openai_defaults_are_temperature_one_and_nothing_else():
    s = Server("--kv-mib", "64", "--sampling-defaults", "openai")
    try:
        d = defaults_of(s)
        assert d["base"] == "openai"
        assert d["temperature"] == (1.0, "openai")
        assert d["top_k"] == (0, "openai")
        assert d["top_p"] == (1.0, "openai")
        assert d["min_p"] == (0.0, "openai")
        assert d["order"][0].startswith("temperature;")
    finally:
        assert s.stop() == 0


def test_an_invalid_default_stops_the_server_with_the_field_named():
    s = Server("--top-p", "1.5", wait=False)
    code = s.proc.wait(timeout=120)
    assert code != 0
    assert "top_p must be in (0, 1], got 1.5" in s.log_text()
