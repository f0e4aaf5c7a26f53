"""Exact status codes where a generic 400 used to be: session caps (429 + Retry-After), a second
turn on a busy session (409), session ids that could never be DELETEd (400 naming the rule)."""
import uuid

import httpx
import pytest

from conftest import MODEL_NAME, Server


@pytest.fixture(scope="module")
def two_sessions():
    s = Server("--max-sessions", "2")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def turn(server, sid, **kw):
    return server.post("/v1/completions", {"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 2,
                                           "temperature": 0, "session_id": sid, **kw})


def test_too_many_sessions_is_429_with_retry_after(two_sessions):
    sids = [f"cap-{uuid.uuid4()}" for _ in range(3)]
    assert turn(two_sessions, sids[0]).status_code == 200
    assert turn(two_sessions, sids[1]).status_code == 200
    r = turn(two_sessions, sids[2])
    assert r.status_code == 429, r.text
    assert r.headers["retry-after"] == "1"
    assert "too many sessions" in r.json()["error"]["message"]
    # Ending one makes room, as the message says.
    assert httpx.delete(f"{two_sessions.url}/v1/sessions/{sids[0]}").status_code == 200
    assert turn(two_sessions, sids[2]).status_code == 200
    for sid in sids[1:]:
        httpx.delete(f"{two_sessions.url}/v1/sessions/{sid}")


def test_second_turn_while_one_runs_is_409(server):
    sid = f"busy-{uuid.uuid4()}"
    with httpx.stream("POST", server.url + "/v1/completions", headers=server.headers(),
                      json={"model": MODEL_NAME, "prompt": "Count:", "max_tokens": 400,
                            "ignore_eos": True, "stream": True, "session_id": sid},
                      timeout=60) as first:
        lines = first.iter_lines()
        next(line for line in lines if line.startswith("data:"))  # the turn is running
        r = turn(server, sid)
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "session_busy"
        assert "has a turn running" in r.json()["error"]["message"]
        assert httpx.delete(f"{server.url}/v1/sessions/{sid}?kill=true",
                            headers=server.headers()).status_code == 200


@pytest.mark.parametrize("bad", ["a/b", "a b", "a?b", "a#b", "a%b", "caf\u00e9"])
def test_session_ids_that_a_url_cannot_name_are_refused(server, bad):
    r = turn(server, bad)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "session_id"
    assert "only letters, digits, '-', '.', '_' and '~'" in err["message"]


def test_every_accepted_session_id_can_be_deleted(server):
    sid = f"Az09-._~{uuid.uuid4().hex}"
    assert turn(server, sid).status_code == 200
    assert httpx.delete(f"{server.url}/v1/sessions/{sid}", headers=server.headers()).status_code == 200
    # Percent-encoded, as clients that escape every character send it.
    assert turn(server, sid).status_code == 200
    encoded = "".join(f"%{b:02X}" for b in sid.encode())
    r = httpx.delete(f"{server.url}/v1/sessions/{encoded}", headers=server.headers())
    assert r.status_code == 200, r.text
    assert r.json()["id"] == sid
    r = httpx.delete(f"{server.url}/v1/sessions/a%2", headers=server.headers())
    assert r.status_code == 400 and "%-escape" in r.json()["error"]["message"]
