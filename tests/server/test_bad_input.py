"""Bad input: each case gets the right status and OpenAI error JSON, and the server serves a
normal request right after it."""
import json
import socket

import httpx
import pytest

from conftest import MODEL_NAME

VOCAB = 49152  # SmolLM2's vocabulary
C, CHAT = "/v1/completions", "/v1/chat/completions"
OK_CHAT = [{"role": "user", "content": "hi"}]


def comp(**kw):
    return {"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 4, **kw}


def chat(**kw):
    return {"model": MODEL_NAME, "messages": OK_CHAT, "max_tokens": 4, **kw}


def nested(depth):
    return ('{"model": "x", "prompt": ' + "[" * depth + "]" * depth + "}").encode()


# (name, method, path, body: dict | bytes, status, param or None, extra headers)
CASES = [
    ("invalid JSON", "POST", C, b'{"prompt": ', 400, None),
    ("body is not an object", "POST", C, b"[1, 2]", 400, None),
    ("prompt missing", "POST", C, {"model": MODEL_NAME}, 400, "prompt"),
    ("prompt wrong type", "POST", C, comp(prompt=5), 400, "prompt"),
    ("empty prompt", "POST", C, comp(prompt=""), 400, "prompt"),
    ("max_tokens string", "POST", C, comp(max_tokens="10"), 400, "max_tokens"),
    ("max_tokens negative", "POST", C, comp(max_tokens=-1), 400, "max_tokens"),
    ("max_tokens zero", "POST", C, comp(max_tokens=0), 400, "max_tokens"),
    ("max_tokens beyond context", "POST", C, comp(max_tokens=1_000_000), 400, "max_tokens"),
    ("max_tokens beyond int64", "POST", C, comp(max_tokens=2**70), 400, "max_tokens"),
    ("n zero", "POST", C, comp(n=0), 400, "n"),
    ("n negative", "POST", C, comp(n=-3), 400, "n"),
    ("n huge", "POST", C, comp(n=1000), 400, "n"),
    ("top_k negative", "POST", C, comp(top_k=-5), 400, "top_k"),
    ("top_k huge", "POST", C, comp(top_k=2**40), 400, "top_k"),
    ("top_p zero", "POST", C, comp(top_p=0), 400, "top_p"),
    ("top_p above one", "POST", C, comp(top_p=1.5), 400, "top_p"),
    ("temperature negative", "POST", C, comp(temperature=-1), 400, "temperature"),
    ("temperature huge", "POST", C, comp(temperature=1e9), 400, "temperature"),
    ("temperature string", "POST", C, comp(temperature="hot"), 400, "temperature"),
    ("logprobs negative", "POST", C, comp(logprobs=-1), 400, "logprobs"),
    ("logprobs huge", "POST", C, comp(logprobs=100), 400, "logprobs"),
    ("top_logprobs without logprobs", "POST", CHAT, chat(top_logprobs=3), 400, "top_logprobs"),
    ("presence_penalty out of range", "POST", C, comp(presence_penalty=5), 400, "presence_penalty"),
    ("seed not an integer", "POST", C, comp(seed="abc"), 400, "seed"),
    ("stream not a boolean", "POST", C, comp(stream="yes"), 400, "stream"),
    ("stream_options without stream", "POST", C, comp(stream_options={"include_usage": True}), 400,
     "stream_options"),
    ("token id -1", "POST", C, comp(prompt=[1, -1, 2]), 400, "prompt"),
    ("token id = vocab size", "POST", C, comp(prompt=[1, VOCAB]), 400, "prompt"),
    ("token id huge", "POST", C, comp(prompt=[2**40]), 400, "prompt"),
    ("prompt beyond the context", "POST", C, comp(prompt=[100] * 9000), 400, "prompt"),
    ("stop wrong type", "POST", C, comp(stop=123), 400, "stop"),
    ("empty stop string", "POST", C, comp(stop=[""]), 400, "stop"),
    ("1000 stop strings", "POST", C, comp(stop=[f"s{i}" for i in range(1000)]), 400, "stop"),
    ("tools on completions", "POST", C, comp(tools=[{"type": "function", "function": {"name": "f"}}]),
     400, "tools"),
    ("deprecated functions", "POST", CHAT, chat(functions=[{"name": "f"}]), 400, "functions"),
    ("response_format of an unknown type", "POST", CHAT, chat(response_format={"type": "xml"}), 400,
     "response_format.type"),
    ("logit_bias token outside the vocabulary", "POST", C, comp(logit_bias={"50256": -100}), 400,
     "logit_bias"),
    ("logit_bias value out of range", "POST", C, comp(logit_bias={"5": -101}), 400, "logit_bias"),
    ("best_of unsupported", "POST", C, comp(best_of=2), 400, "best_of"),
    ("empty messages", "POST", CHAT, chat(messages=[]), 400, "messages"),
    ("messages not a list", "POST", CHAT, chat(messages="hi"), 400, "messages"),
    ("unknown role", "POST", CHAT, chat(messages=[{"role": "wizard", "content": "hi"}]), 400,
     "messages[0].role"),
    ("message without content", "POST", CHAT, chat(messages=[{"role": "user"}]), 400,
     "messages[0].content"),
    ("image content part", "POST", CHAT,
     chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
     400, "messages[0].content"),
    ("chat prompt beyond the context", "POST", CHAT,
     chat(messages=[{"role": "user", "content": "hello " * 9000}]), 400, "messages"),
    ("invalid UTF-8", "POST", C, b'{"prompt": "caf\xc3(", "max_tokens": 4}', 400, None),
    ("overlong UTF-8", "POST", C, b'{"prompt": "\xc0\xaf", "max_tokens": 4}', 400, None),
    ("deeply nested JSON", "POST", C, nested(100_000), 400, None),
    ("unknown model", "POST", C, comp(model="gpt-4"), 404, None),
    ("unknown route", "POST", "/v1/engines", comp(), 404, None),
    ("wrong method", "GET", C, None, 405, None),
    ("detokenize bad id", "POST", "/detokenize", {"tokens": [VOCAB + 5]}, 400, "tokens"),
    ("tokenize without prompt", "POST", "/tokenize", {}, 400, "prompt"),
]


def check_error(r, status, param):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err


def normal_request_succeeds(server):
    r = server.post(C, comp(temperature=0))
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.parametrize("name,method,path,body,status,param", CASES, ids=[c[0] for c in CASES])
def test_bad_input(server, name, method, path, body, status, param):
    if isinstance(body, bytes):
        r = httpx.request(method, server.url + path, content=body,
                          headers={"Content-Type": "application/json"}, timeout=60)
    else:
        r = httpx.request(method, server.url + path, json=body, timeout=60)
    check_error(r, status, param)
    normal_request_succeeds(server)


def test_body_over_limit(server):
    body = b'{"prompt": "' + b"a" * (10 << 20) + b'"}'
    r = httpx.post(server.url + C, content=body, headers={"Content-Type": "application/json"},
                   timeout=60)
    check_error(r, 413, None)
    normal_request_succeeds(server)


def test_huge_header(server):
    r = httpx.post(server.url + C, json=comp(), headers={"X-Junk": "a" * (64 << 10)}, timeout=60)
    check_error(r, 431, None)
    normal_request_succeeds(server)


def test_garbage_request_line(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"\x00\x01 not http at all\r\n\r\n")
        reply = s.recv(65536).decode(errors="replace")
    assert reply.startswith("HTTP/1.1 400"), reply
    assert '"error"' in reply
    normal_request_succeeds(server)


def test_invalid_utf8_never_reaches_output(server):
    # A token sequence that decodes to a lone byte of a multi-byte character: the output must
    # still be valid JSON of valid UTF-8 (the byte becomes U+FFFD).
    ids = server.post("/tokenize", {"prompt": "é"}).json()["tokens"]
    r = server.post(C, comp(prompt=ids, max_tokens=4, temperature=0))
    assert r.status_code == 200
    r.content.decode("utf-8")  # raises if broken
    json.loads(r.content)
