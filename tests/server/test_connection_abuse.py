"""Connections that try to pin the server: sockets that never send a byte, many sockets from one
address, and HTTP forms clients legitimately send (HEAD, absolute-form targets)."""
import socket
import time

import httpx
import pytest

from conftest import Server


def idle_socket(port, source):
    """A connection from `source` (any 127/8 address works on loopback) that sends nothing."""
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.settimeout(10)
    return s


def closed_by_server(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.fixture(scope="module")
def guarded():
    s = Server("--max-connections", "16", "--max-connections-per-client", "8",
               "--header-timeout", "2", "--body-timeout", "2")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def test_idle_sockets_cannot_lock_out_health(guarded):
    # Before: 16 silent sockets held every slot for 60 s and /health answered 503.
    held = [idle_socket(guarded.port, src) for src in ("127.0.0.2", "127.0.0.3") for _ in range(8)]
    time.sleep(0.3)
    t0 = time.time()
    r = httpx.get(guarded.url + "/health", timeout=5)
    assert r.status_code == 200, r.text
    assert time.time() - t0 < 1
    # The longest-idle one made room; the rest are closed once the header timeout (2 s) passes.
    assert closed_by_server(held[0])
    t0 = time.time()
    assert all(closed_by_server(s) for s in held[1:])
    assert time.time() - t0 < 4
    for s in held:
        s.close()


def test_one_address_over_its_cap_gets_429(guarded):
    held = [idle_socket(guarded.port, "127.0.0.4") for _ in range(8)]
    time.sleep(0.2)
    extra = idle_socket(guarded.port, "127.0.0.4")
    answer = extra.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 429"), answer
    assert "Retry-After: 1" in answer
    assert "too many connections from 127.0.0.4" in answer
    assert httpx.get(guarded.url + "/health", timeout=5).status_code == 200
    for s in held + [extra]:
        s.close()


def test_head_health_answers_like_get_without_a_body(server):
    r = httpx.head(server.url + "/health", timeout=5)
    assert r.status_code == 200
    assert r.content == b""
    assert int(r.headers["content-length"]) == len(httpx.get(server.url + "/health").content)


def test_absolute_form_target_is_served(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(f"GET http://127.0.0.1:{server.port}/v1/models HTTP/1.1\r\nHost: x\r\n"
                  "Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b'"object":"list"' in answer


# ---- fault injection: clients that misbehave mid-request ----

def test_slowloris_header_is_cut_at_the_header_timeout(guarded):
    # One byte every 0.3 s never completes a header: the connection goes after --header-timeout
    # (2 s) however steadily it trickles.
    s = idle_socket(guarded.port, "127.0.0.5")
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 100
    t0 = time.time()
    closed = False
    for byte in request:
        try:
            s.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        time.sleep(0.3)
        if time.time() - t0 > 6:
            break
    assert closed or closed_by_server(s)
    assert time.time() - t0 < 6
    s.close()


def test_partial_body_is_cut_at_the_body_timeout(guarded):
    s = idle_socket(guarded.port, "127.0.0.6")
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{\"prompt\": \"abc")
    t0 = time.time()
    assert closed_by_server(s)  # --body-timeout 2
    assert 1.5 < time.time() - t0 < 5
    s.close()
    # A client that gives up half-way through its body changes nothing either.
    s = idle_socket(guarded.port, "127.0.0.6")
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"pro")
    s.close()
    assert httpx.get(guarded.url + "/health", timeout=5).status_code == 200


def test_client_leaving_mid_stream_frees_its_sequence(guarded):
    before = guarded.metrics()
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=30) as s:
        body = (b'{"model": "smollm2", "prompt": "Once upon a time", "max_tokens": 2000, '
                b'"ignore_eos": true, "stream": true}')
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(65536)
    # Gone after three events: the generation is cancelled, not run to 2000 tokens.
    deadline = time.time() + 10
    while time.time() < deadline:
        m = guarded.metrics()
        if m["vllm:num_requests_running"] == 0 and \
                m["drift:client_disconnects_total"] > before["drift:client_disconnects_total"]:
            break
        time.sleep(0.1)
    assert m["vllm:num_requests_running"] == 0
    assert m["drift:client_disconnects_total"] == before["drift:client_disconnects_total"] + 1
    assert m["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] < 2000
    assert httpx.get(guarded.url + "/health", timeout=5).status_code == 200
