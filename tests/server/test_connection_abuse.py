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
               "--header-timeout", "2")
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
