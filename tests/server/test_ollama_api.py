"""Ollama's API (`/api/chat`, `/api/generate`, `/api/embed`, `/api/embeddings`, `/api/tags`,
`/api/show`, `/api/ps`, `/api/version`) through the official `ollama` client against a live
`drift serve` on the default model: chat and generate, whole and streamed, give the greedy text
that /v1/chat/completions gives; a raw generate gives /v1/completions' text; the NDJSON wire has
Ollama's fields, counts and durations; a tool call comes back as Ollama's tool_calls and its
result goes back as a tool turn; format "json" and a schema constrain the reply; embed equals
/v1/embeddings; the listings describe the model; bad input gets a 4xx in Ollama's error shape
while the server keeps serving."""
import json
import math

import httpx
import jsonschema
import ollama
import pytest

from conftest import MODEL_NAME, Server

GREEDY = {"temperature": 0, "num_predict": 24}
QUESTION = [{"role": "system", "content": "You are brief."},
            {"role": "user", "content": "Name three colors of the rainbow."}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CALL_PROMPT = [{"role": "user", "content": "Call get_weather for Paris."}]


@pytest.fixture(scope="module")
def llama(server):
    return ollama.Client(host=server.url, headers=server.headers(), timeout=120)


def openai_chat_text(client, messages, max_tokens, **kw):
    r = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=max_tokens,
                                       temperature=0, **kw)
    return r.choices[0].message.content, r.usage


def ndjson(server, path, body):
    """Each line of a streamed Ollama reply, parsed, and the response's Content-Type."""
    with httpx.stream("POST", server.url + path, json=body, headers=server.headers(),
                      timeout=120) as r:
        assert r.status_code == 200, r.read()
        lines = [json.loads(line) for line in r.iter_lines() if line]
        return lines, r.headers["content-type"]


def test_chat_whole_and_streamed_give_the_chat_endpoints_greedy_text(llama, client):
    expected, usage = openai_chat_text(client, QUESTION, GREEDY["num_predict"])
    whole = llama.chat(model=MODEL_NAME, messages=QUESTION, options=GREEDY, stream=False)
    assert whole.message.role == "assistant" and whole.message.content == expected
    assert whole.done and whole.done_reason in ("stop", "length")
    assert whole.prompt_eval_count == usage.prompt_tokens
    assert whole.eval_count == usage.completion_tokens
    parts = list(llama.chat(model=MODEL_NAME, messages=QUESTION, options=GREEDY, stream=True))
    assert "".join(p.message.content for p in parts) == expected
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert parts[-1].eval_count == whole.eval_count and parts[-1].done_reason == whole.done_reason
    # The model's name with its tag is the same model; the reply echoes the name asked for.
    tagged = llama.chat(model=MODEL_NAME + ":latest", messages=QUESTION, options=GREEDY,
                        stream=False)
    assert tagged.message.content == expected and tagged.model == MODEL_NAME + ":latest"


def test_generate_is_a_turn_of_system_and_prompt_and_raw_is_a_completion(llama, client):
    expected, _ = openai_chat_text(client, QUESTION, GREEDY["num_predict"])
    whole = llama.generate(model=MODEL_NAME, system=QUESTION[0]["content"],
                           prompt=QUESTION[1]["content"], options=GREEDY, stream=False)
    assert whole.response == expected and whole.done
    parts = list(llama.generate(model=MODEL_NAME, system=QUESTION[0]["content"],
                                prompt=QUESTION[1]["content"], options=GREEDY, stream=True))
    assert "".join(p.response for p in parts) == expected
    raw = llama.generate(model=MODEL_NAME, prompt="The capital of France is", raw=True,
                         options={"temperature": 0, "num_predict": 8}, stream=False)
    completion = client.completions.create(model=MODEL_NAME, prompt="The capital of France is",
                                           max_tokens=8, temperature=0)
    assert raw.response == completion.choices[0].text
    assert raw.done_reason == "length" and raw.eval_count == 8


def test_the_ndjson_wire_carries_ollamas_fields_counts_and_durations(server):
    body = {"model": MODEL_NAME, "messages": QUESTION, "options": GREEDY}
    lines, content_type = ndjson(server, "/api/chat", body)
    assert content_type.startswith("application/x-ndjson")
    *fragments, last = lines
    assert fragments and all(not f["done"] and f["model"] == MODEL_NAME for f in fragments)
    assert all(f["created_at"].endswith("Z") for f in lines)
    assert last["done"] and last["message"] == {"role": "assistant", "content": ""}
    durations = [last[k] for k in ("load_duration", "prompt_eval_duration", "eval_duration")]
    assert all(isinstance(d, int) and d >= 0 for d in durations)
    # The parts add up to the whole (each is measured to the same clock's readings).
    assert abs(sum(durations) - last["total_duration"]) < 5_000_000
    assert last["eval_duration"] > 0 and last["eval_count"] == len(fragments)
    generate, _ = ndjson(server, "/api/generate",
                         {"model": MODEL_NAME, "prompt": "Hi", "options": GREEDY})
    assert all("response" in line and "message" not in line for line in generate)


def test_stop_strings_seeds_and_a_load_request(llama):
    stopped = llama.chat(model=MODEL_NAME, messages=QUESTION, stream=False,
                         options={"temperature": 0, "num_predict": 40, "stop": [","]})
    assert "," not in stopped.message.content and stopped.done_reason == "stop"
    sampled = [llama.chat(model=MODEL_NAME, messages=QUESTION, stream=False,
                          options={"temperature": 1.0, "seed": 7, "num_predict": 20}).message.content
               for _ in range(2)]
    assert sampled[0] == sampled[1]
    # No prompt: Ollama's way to load a model, answered at once.
    loaded = llama.generate(model=MODEL_NAME, stream=False)
    assert loaded.done and loaded.done_reason == "load" and loaded.response == ""


def test_a_tool_call_and_its_result_round_trip(llama, client):
    reply = llama.chat(model=MODEL_NAME, messages=CALL_PROMPT, tools=[WEATHER],
                       options={"temperature": 0, "num_predict": 120}, stream=False)
    assert reply.message.tool_calls, reply
    call = reply.message.tool_calls[0]
    assert call.function.name == "get_weather"
    jsonschema.validate(dict(call.function.arguments), WEATHER["function"]["parameters"])
    streamed = list(llama.chat(model=MODEL_NAME, messages=CALL_PROMPT, tools=[WEATHER],
                               options={"temperature": 0, "num_predict": 120}, stream=True))
    assert [c for p in streamed for c in (p.message.tool_calls or [])] == reply.message.tool_calls
    # The call and its result go back as Ollama sends them (a tool turn names its tool); the
    # template sees what the chat endpoint's call and tool turns give it, so the text agrees.
    turns = CALL_PROMPT + [reply.message,
                           {"role": "tool", "tool_name": "get_weather", "content": "18 C, sunny"}]
    answer = llama.chat(model=MODEL_NAME, messages=turns, tools=[WEATHER], stream=False,
                        options=GREEDY)
    openai_turns = CALL_PROMPT + [
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_1_0", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(dict(call.function.arguments))}}]},
        {"role": "tool", "tool_call_id": "call_1_0", "content": "18 C, sunny"}]
    expected, usage = openai_chat_text(client, openai_turns, GREEDY["num_predict"],
                                       tools=[WEATHER])
    assert answer.prompt_eval_count == usage.prompt_tokens > reply.prompt_eval_count
    assert (answer.message.content or "") == (expected or "")


def test_format_json_and_a_schema_constrain_the_reply(llama):
    r = llama.generate(model=MODEL_NAME, prompt="Describe a cat as JSON.", format="json",
                       options={"temperature": 0, "num_predict": 60}, stream=False)
    if r.done_reason == "stop":
        assert isinstance(json.loads(r.response), dict)
    else:
        assert r.response.lstrip().startswith("{")
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    r = llama.chat(model=MODEL_NAME, format=schema, stream=False,
                   messages=[{"role": "user", "content": "Invent a person."}],
                   options={"temperature": 0, "num_predict": 80})
    assert r.done_reason == "stop", r
    jsonschema.validate(json.loads(r.message.content), schema)


def test_embed_equals_the_embeddings_endpoint(llama, client):
    texts = ["The cat sat on the mat.", "Hello"]
    ours = llama.embed(model=MODEL_NAME, input=texts)
    theirs = client.embeddings.create(model=MODEL_NAME, input=texts, encoding_format="float")
    assert len(ours.embeddings) == 2 and ours.model == MODEL_NAME
    for a, b in zip(ours.embeddings, theirs.data):
        assert len(a) == len(b.embedding) and max(abs(x - y) for x, y in zip(a, b.embedding)) < 1e-6
    assert ours.prompt_eval_count == theirs.usage.prompt_tokens and ours.total_duration > 0
    legacy = llama.embeddings(model=MODEL_NAME, prompt=texts[1])
    assert max(abs(x - y) for x, y in zip(legacy.embedding, theirs.data[1].embedding)) < 1e-6
    assert abs(math.sqrt(sum(x * x for x in legacy.embedding)) - 1) < 1e-5


def test_embed_truncates_a_long_input_unless_told_not_to():
    small = Server("--ctx-size", "64", "--kv-mib", "16")
    try:
        llama = ollama.Client(host=small.url, timeout=120)
        long_text = "word " * 200  # more tokens than the context's 64
        cut = llama.embed(model=MODEL_NAME, input=long_text)
        assert cut.prompt_eval_count == 64
        # What was kept is the input's first 64 tokens, embedded as they are.
        ids = httpx.post(small.url + "/tokenize", json={"prompt": long_text}).json()["tokens"]
        first = embedding_of_ids(small, ids[:64])
        assert max(abs(x - y) for x, y in zip(cut.embeddings[0], first)) < 1e-6
        with pytest.raises(ollama.ResponseError) as e:
            llama.embed(model=MODEL_NAME, input=long_text, truncate=False)
        assert e.value.status_code == 400 and "context" in e.value.error
    finally:
        assert small.stop() == 0


def embedding_of_ids(server, ids):
    r = server.post("/v1/embeddings", {"model": MODEL_NAME, "input": ids})
    assert r.status_code == 200, r.text
    return r.json()["data"][0]["embedding"]


def test_the_listings_describe_the_served_model(server, llama):
    models = llama.list().models
    assert [m.model for m in models] == [MODEL_NAME + ":latest"]
    details = models[0].details
    assert details.format == "gguf" and details.family == "llama"
    assert details.parameter_size == "135M" and details.quantization_level == "Q4_1"
    assert models[0].size > 50_000_000 and models[0].modified_at is not None
    show = llama.show(MODEL_NAME)
    assert "tools" in show.capabilities and "completion" in show.capabilities
    assert show.modelinfo["general.architecture"] == "llama"
    assert show.modelinfo["llama.embedding_length"] == 576
    assert "im_start" in show.template
    running = llama.ps().models
    assert [m.model for m in running] == [MODEL_NAME + ":latest"]
    assert running[0].context_length == 8192 and running[0].size_vram == 0
    version = httpx.get(server.url + "/api/version", headers=server.headers()).json()
    assert isinstance(version["version"], str) and version["version"].count(".") == 2


@pytest.mark.parametrize("path,body,status,words", [
    ("/api/chat", {"model": "nope", "messages": CALL_PROMPT}, 404, "not found"),
    ("/api/chat", {"model": MODEL_NAME, "messages": "hi"}, 400, "messages"),
    ("/api/chat", {"model": MODEL_NAME, "messages": [{"role": "robot", "content": "x"}]}, 400,
     "role"),
    ("/api/chat", {"model": MODEL_NAME, "messages": [
        {"role": "user", "content": "x", "images": ["aGk="]}]}, 400, "images"),
    ("/api/chat", {"model": MODEL_NAME, "messages": CALL_PROMPT,
                   "options": {"temperature": "hot"}}, 400, "options.temperature"),
    ("/api/chat", {"model": MODEL_NAME, "messages": CALL_PROMPT,
                   "options": {"num_ctx": 100000}}, 400, "num_ctx"),
    ("/api/chat", {"model": MODEL_NAME, "messages": CALL_PROMPT,
                   "options": {"warp_speed": 9}}, 400, "options.warp_speed"),
    ("/api/chat", {"model": MODEL_NAME, "messages": CALL_PROMPT, "think": True}, 400,
     "does not support thinking"),
    ("/api/chat", {"model": MODEL_NAME, "messages": CALL_PROMPT, "format": "yaml"}, 400,
     "format"),
    ("/api/generate", {"model": MODEL_NAME, "prompt": "x", "template": "{{ .Prompt }}"}, 400,
     "template"),
    ("/api/generate", {"prompt": "x"}, 400, "model"),
    ("/api/embed", {"model": MODEL_NAME, "input": [""]}, 400, "input"),
    ("/api/embed", {"model": MODEL_NAME, "input": "x", "dimensions": 3}, 400, "dimensions"),
    ("/api/show", {"model": "nope"}, 404, "not found"),
    ("/api/pull", {"model": MODEL_NAME}, 404, "no route"),
])
def test_bad_input_gets_a_4xx_in_ollamas_shape(server, path, body, status, words):
    r = server.post(path, body)
    assert r.status_code == status, r.text
    assert list(r.json()) == ["error"] and words in r.json()["error"], r.text
    assert server.post("/api/chat", {"model": MODEL_NAME, "messages": CALL_PROMPT,
                                     "stream": False,
                                     "options": {"num_predict": 2}}).status_code == 200


def test_the_client_raises_ollamas_error_for_bad_input(llama):
    with pytest.raises(ollama.ResponseError) as e:
        llama.chat(model=MODEL_NAME, messages=CALL_PROMPT, options={"top_k": -1})
    assert e.value.status_code == 400 and "options.top_k" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        list(llama.chat(model="other", messages=CALL_PROMPT, stream=True))
    assert e.value.status_code == 404
