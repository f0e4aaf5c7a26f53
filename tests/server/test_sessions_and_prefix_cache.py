"""Prefix cache and conversation sessions over HTTP: the vLLM prefix-cache counters, session_id
turns on /v1/completions, DELETE /v1/sessions/{id}, and that neither changes an answer."""
import uuid

import httpx


def greedy(server, prompt, max_tokens=12, **extra):
    r = server.post("/v1/completions", {"prompt": prompt, "max_tokens": max_tokens,
                                         "temperature": 0, "ignore_eos": True, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def test_shared_prefix_hits_the_cache_and_answers_stay_the_same(server):
    system = "You are a careful assistant who answers questions about the weather. " * 12
    before = server.metrics()
    first = greedy(server, system + "Question: is it raining?")
    second = greedy(server, system + "Question: is it snowing?")
    again = greedy(server, system + "Question: is it raining?")
    after = server.metrics()
    queried = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    prompt_tokens = sum(x["usage"]["prompt_tokens"] for x in (first, second, again))
    assert queried == prompt_tokens
    # The second and third requests find (at least) the shared system prompt's full pages.
    assert hits >= 2 * (first["usage"]["prompt_tokens"] - 32)
    assert again["choices"][0]["text"] == first["choices"][0]["text"]
    assert after["drift:prefix_cache_enabled"] == 1


def test_session_turns_continue_the_history(server):
    sid = f"s-{uuid.uuid4()}"
    turn1 = greedy(server, "The first three planets are", session_id=sid)
    turn2 = greedy(server, " and the fourth is", session_id=sid)
    # The same history submitted fresh, as one prompt of token ids, gives the same answer.
    tokens = server.post("/tokenize", {"prompt": "The first three planets are"}).json()["tokens"]
    history = tokens + server.post("/tokenize", {
        "prompt": turn1["choices"][0]["text"], "add_special_tokens": False}).json()["tokens"]
    new = server.post("/tokenize", {"prompt": " and the fourth is",
                                    "add_special_tokens": False}).json()["tokens"]
    fresh = greedy(server, history + new)
    assert turn2["choices"][0]["text"] == fresh["choices"][0]["text"]
    assert server.metrics()["drift:sessions_open"] >= 1

    r = httpx.delete(f"{server.url}/v1/sessions/{sid}", headers=server.headers())
    assert r.status_code == 200 and r.json()["deleted"] is True
    r = httpx.delete(f"{server.url}/v1/sessions/{sid}", headers=server.headers())
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"


def test_kill_session_cancels_its_running_turn(server):
    sid = f"k-{uuid.uuid4()}"
    with httpx.stream("POST", server.url + "/v1/completions", headers=server.headers(),
                      json={"prompt": "Count:", "max_tokens": 400, "temperature": 0,
                            "ignore_eos": True, "stream": True, "session_id": sid},
                      timeout=120) as stream:
        lines = stream.iter_lines()
        next(line for line in lines if line.startswith("data: {"))  # the turn is running
        r = httpx.delete(f"{server.url}/v1/sessions/{sid}?kill=true", headers=server.headers())
        assert r.status_code == 200 and r.json()["killed"] is True
        rest = list(lines)
    # A stream cut short after its headers ends with an error event, then [DONE].
    assert "data: [DONE]" in rest
    assert any(line.startswith('data: {"error"') and "cancelled" in line for line in rest), rest[-4:]
    # The session is gone with its turn.
    r = httpx.delete(f"{server.url}/v1/sessions/{sid}", headers=server.headers())
    assert r.status_code == 404


def test_session_bad_requests(server):
    r = server.post("/v1/completions", {"prompt": ["a", "b"], "session_id": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "session_id"
    r = server.post("/v1/completions", {"prompt": "a", "n": 2, "session_id": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "session_id"
    r = server.post("/v1/completions", {"prompt": "a", "session_id": ""})
    assert r.status_code == 400
    r = server.post("/v1/completions", {"prompt": "a", "session_id": 7})
    assert r.status_code == 400
    r = server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                             "session_id": "x"})
    assert r.status_code == 400 and "/v1/completions" in r.json()["error"]["message"]
    r = httpx.get(f"{server.url}/v1/sessions/whatever", headers=server.headers())
    assert r.status_code == 405


def test_a_stop_string_ends_a_session_turn_as_stop_and_the_turn_stays(server):
    # The repro: a stop string used to cancel the turn (its history lost, the next turn
    # refused with 409 while the cancel was pending, "cancelled" counted in the metrics).
    sid = f"stop-{uuid.uuid4()}"
    key_stop = 'vllm:request_success_total{finished_reason="stop"}'
    key_cancelled = 'vllm:request_success_total{finished_reason="cancelled"}'
    before = server.metrics()
    r = server.post("/v1/completions", {"session_id": sid, "prompt": "1, 2, 3, 4, 5, 6,",
                                        "stop": [" 9"], "max_tokens": 40, "temperature": 0,
                                        "logprobs": 0})
    assert r.status_code == 200, r.text
    turn1 = r.json()
    choice = turn1["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    assert " 9" not in choice["text"]
    # The logprobs are of the text's tokens only: none of the tokens that wrote " 9".
    tokens = choice["logprobs"]["tokens"]
    assert "".join(tokens) == choice["text"]
    after = server.metrics()
    assert after[key_stop] == before[key_stop] + 1
    assert after[key_cancelled] == before[key_cancelled]

    # The next turn, at once: the session holds the turn up to the stop string.
    r = server.post("/v1/completions", {"session_id": sid, "prompt": " 10,", "max_tokens": 3,
                                        "temperature": 0})
    assert r.status_code == 200, r.text
    new = server.post("/tokenize", {"prompt": " 10,", "add_special_tokens": False}).json()
    assert r.json()["usage"]["prompt_tokens"] == (turn1["usage"]["prompt_tokens"] + len(tokens)
                                                  + len(new["tokens"]))
    httpx.delete(f"{server.url}/v1/sessions/{sid}", headers=server.headers())
