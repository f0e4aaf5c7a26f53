"""Huge prompts: refused from their size before tokenization when they cannot fit the context,
and parsed/tokenized off the I/O thread so that /health and running streams do not wait."""
import re
import subprocess
import sys
import time

import httpx

from conftest import MODEL_NAME

SEVEN_MB = "lorem ipsum dolor sit amet " * (7_000_000 // 27)


def test_prompt_that_cannot_fit_is_refused_before_tokenizing(server):
    t0 = time.time()
    r = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": SEVEN_MB, "max_tokens": 1})
    elapsed = time.time() - t0
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "prompt"
    m = re.search(r"context length is (\d+) tokens, but the prompt has (\d+) bytes, at least "
                  r"(\d+) tokens \(no token of this model covers more than (\d+) bytes\)",
                  err["message"])
    assert m, err["message"]
    context, size, at_least, per_token = map(int, m.groups())
    assert size == len(SEVEN_MB) and at_least >= context and 4 <= per_token <= 256
    assert elapsed < 2, f"took {elapsed:.1f} s: tokenized whole?"  # tokenizing it takes ~3.5 s


def test_bound_refuses_nothing_that_fits(server):
    # A prompt of exactly the byte bound is tokenized and judged by its token count, never by its
    # size (one byte more would be refused by the bound).
    r = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": SEVEN_MB, "max_tokens": 1})
    per_token = int(re.search(r"covers more than (\d+) bytes", r.json()["error"]["message"])[1])
    context = httpx.get(server.url + "/v1/models").json()["data"][0]["max_model_len"]
    prompt = "a" * ((context - 1) * per_token)
    r = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 1})
    assert r.status_code == 400
    assert "bytes" not in r.json()["error"]["message"]  # refused by its tokens, not its bytes
    assert "tokens" in r.json()["error"]["message"]


def test_chat_prompt_that_cannot_fit_is_refused_before_tokenizing(server):
    t0 = time.time()
    r = server.post("/v1/chat/completions", {
        "model": MODEL_NAME, "messages": [{"role": "user", "content": SEVEN_MB}], "max_tokens": 1})
    assert r.status_code == 400, r.text
    assert "messages have" in r.json()["error"]["message"]  # judged by size, not tokenized
    assert time.time() - t0 < 2


def test_health_and_streams_do_not_wait_for_big_tokenizations(server):
    # Three 7 MB /tokenize requests take seconds of tokenizer work each, and their replies (over a
    # million ids) take a while to write as JSON; both happen on the prompt workers while the I/O
    # thread keeps answering. The big requests run in child processes: in this one, uploading them
    # and parsing their replies would hold the GIL and delay the probes, whatever the server did.
    client = (
        "import sys, httpx\n"
        "r = httpx.post(sys.argv[1] + '/tokenize', json={'prompt': sys.argv[2] * int(sys.argv[3])},"
        " timeout=120)\n"
        "print(r.status_code, r.json().get('count', 0))\n")
    unit = "lorem ipsum dolor sit amet "
    children = [subprocess.Popen([sys.executable, "-c", client, server.url, unit,
                                  str(len(SEVEN_MB) // len(unit))],
                                 stdout=subprocess.PIPE, text=True) for _ in range(3)]
    time.sleep(1.0)  # the children started, their bodies uploaded and the tokenizers busy
    worst = 0.0
    stream_gaps = []
    probes_while_busy = 0
    with httpx.Client(timeout=30) as c:
        # A stream as long as the tokenizations last (however fast this machine tokenizes), probed
        # at each of its tokens; it is left (and so cancelled) once they are done.
        with c.stream("POST", server.url + "/v1/completions",
                      json={"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 4000,
                            "temperature": 0, "stream": True, "ignore_eos": True}) as s:
            last = time.time()
            for line in s.iter_lines():
                if all(child.poll() is not None for child in children):
                    break
                if line.startswith("data:"):
                    now = time.time()
                    stream_gaps.append(now - last)
                    last = now
                t0 = time.time()
                assert c.get(server.url + "/health").status_code == 200
                worst = max(worst, time.time() - t0)
                probes_while_busy += 1
    results = [tuple(map(int, child.communicate()[0].split())) for child in children]
    assert results and all(code == 200 and count > 1_000_000 for code, count in results), results
    assert probes_while_busy >= 5, "the big requests ended before the probes: the test measured nothing"
    print(f"/health while 3 big prompts were tokenized: worst {worst:.3f} s over {probes_while_busy} probes")
    assert worst < 1.0, f"/health took {worst:.2f} s while prompts were tokenized"
    assert max(stream_gaps) < 2.0, f"a stream stalled {max(stream_gaps):.2f} s"
