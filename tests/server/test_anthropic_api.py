"""Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`) through the
official `anthropic` client against a live `drift serve` on the default model: whole and
streamed replies agree at temperature 0, stop sequences and max_tokens give their stop reasons,
count_tokens counts what the message uses, a forced tool call validates against its schema and
its result comes back as text, the key may come as x-api-key, and bad input gets a 4xx in
Anthropic's error shape while the server keeps serving."""
import json
import re

import anthropic
import httpx
import jsonschema
import pytest

from conftest import MODEL_NAME, Server

# The official client (2.14) no longer offers temperature/top_p/top_k as arguments; Anthropic's
# API documents them and drift takes them, so they go in extra_body.
GREEDY = {"extra_body": {"temperature": 0}}
QUESTION = [{"role": "user", "content": "Name three colors of the rainbow."}]
WEATHER = {"name": "get_weather", "description": "Current weather in a city",
           "input_schema": {"type": "object", "properties": {
               "city": {"type": "string", "maxLength": 40},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
               "required": ["city"]}}


def anthropic_client(server, **kw):
    kw.setdefault("api_key", server.api_key or "unused")
    return anthropic.Anthropic(base_url=server.url, max_retries=0, timeout=120, **kw)


@pytest.fixture(scope="module")
def claude(server):
    return anthropic_client(server)


def text_of(message):
    return "".join(block.text for block in message.content if block.type == "text")


def raw_events(server, body, headers=None):
    """(event line name, data) of each SSE frame of a streamed /v1/messages, pings included."""
    out = []
    with httpx.stream("POST", server.url + "/v1/messages", json={**body, "stream": True},
                      headers=headers or {}, timeout=120) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: "):])
                assert data["type"] == name, (name, data)
                out.append((name, data))
                name = None
    return out


def test_a_message_and_its_stream_agree_at_temperature_0(server, claude):
    whole = claude.messages.create(model=MODEL_NAME, max_tokens=40, **GREEDY,
                                   system="You are brief.", messages=QUESTION)
    assert whole.id.startswith("msg_") and whole.type == "message" and whole.role == "assistant"
    assert whole.model == MODEL_NAME
    assert [b.type for b in whole.content] == ["text"] and text_of(whole).strip()
    assert whole.stop_reason in ("end_turn", "max_tokens") and whole.stop_sequence is None
    assert whole.usage.input_tokens > 0 and 0 < whole.usage.output_tokens <= 40
    with claude.messages.stream(model=MODEL_NAME, max_tokens=40, **GREEDY,
                                system="You are brief.", messages=QUESTION) as stream:
        streamed_text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed_text == text_of(whole)
    assert text_of(final) == text_of(whole)
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == \
        whole.usage.output_tokens
    # The wire: Anthropic's event order, every frame named by an event line.
    events = raw_events(server, {"model": MODEL_NAME, "max_tokens": 40, "temperature": 0,
                                 "system": "You are brief.", "messages": QUESTION})
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"], names
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"], names
    assert set(names[3:-3]) == {"content_block_delta"}, names
    assert events[0][1]["message"]["usage"]["input_tokens"] == whole.usage.input_tokens
    assert "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta") == \
        text_of(whole)
    assert events[-2][1]["delta"]["stop_reason"] == whole.stop_reason
    assert events[-2][1]["usage"]["output_tokens"] == whole.usage.output_tokens


def test_a_message_is_the_chat_completion_of_the_same_conversation(client, claude):
    """One request path: the same conversation through OpenAI's chat endpoint gives the same
    prompt tokens, the same greedy text and the same stop."""
    system = "You are brief."
    chat = client.chat.completions.create(
        model=MODEL_NAME, max_tokens=40, temperature=0,
        messages=[{"role": "system", "content": system}] + QUESTION)
    message = claude.messages.create(model=MODEL_NAME, max_tokens=40, **GREEDY, system=system,
                                     messages=QUESTION)
    assert text_of(message) == chat.choices[0].message.content
    assert message.usage.input_tokens == chat.usage.prompt_tokens
    assert message.usage.output_tokens == chat.usage.completion_tokens
    assert {"stop": "end_turn", "length": "max_tokens"}[chat.choices[0].finish_reason] == \
        message.stop_reason


def test_stop_sequences_and_max_tokens_give_their_stop_reasons(claude):
    free = text_of(claude.messages.create(model=MODEL_NAME, max_tokens=40, **GREEDY,
                                          messages=QUESTION))
    words = free.split()
    assert len(words) >= 4, free
    stop = " " + words[2]  # a sequence the greedy reply reaches, after some text
    cut = claude.messages.create(model=MODEL_NAME, max_tokens=40, **GREEDY,
                                 messages=QUESTION, stop_sequences=["\u2603 never", stop])
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop, cut
    assert text_of(cut) == free[:free.index(stop)]
    with claude.messages.stream(model=MODEL_NAME, max_tokens=40, **GREEDY,
                                messages=QUESTION, stop_sequences=[stop]) as stream:
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence, text_of(final)) == \
        ("stop_sequence", stop, text_of(cut))
    short = claude.messages.create(model=MODEL_NAME, max_tokens=3, **GREEDY,
                                   messages=QUESTION)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 3, short
    assert free.startswith(text_of(short))


def test_count_tokens_counts_what_the_message_uses(claude):
    kw = dict(model=MODEL_NAME, system=[{"type": "text", "text": "You are brief."}],
              messages=QUESTION + [{"role": "assistant", "content": "Red,"},
                                   {"role": "user", "content": [{"type": "text", "text": "More"}]}])
    counted = claude.messages.count_tokens(**kw)
    used = claude.messages.create(max_tokens=2, **kw)
    assert counted.input_tokens == used.usage.input_tokens > 20
    with_tools = claude.messages.count_tokens(tools=[WEATHER], **kw)
    assert with_tools.input_tokens == claude.messages.create(
        max_tokens=2, tools=[WEATHER], **kw).usage.input_tokens
    assert with_tools.input_tokens > counted.input_tokens, "the tools are part of the prompt"


def test_a_forced_tool_call_validates_and_its_result_comes_back_as_text(claude):
    messages = [{"role": "user", "content": "What is the weather in Oslo?"}]
    call = claude.messages.create(model=MODEL_NAME, max_tokens=120, **GREEDY,
                                  messages=messages, tools=[WEATHER],
                                  tool_choice={"type": "tool", "name": "get_weather"})
    assert call.stop_reason == "tool_use", call
    uses = [b for b in call.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather", call
    assert uses[0].id.startswith("toolu_")
    jsonschema.validate(uses[0].input, WEATHER["input_schema"])
    # Streamed: the same call, its input sent as input_json_delta.
    with claude.messages.stream(model=MODEL_NAME, max_tokens=120, **GREEDY,
                                messages=messages, tools=[WEATHER],
                                tool_choice={"type": "tool", "name": "get_weather"}) as stream:
        final = stream.get_final_message()
    streamed_uses = [b for b in final.content if b.type == "tool_use"]
    assert [(b.name, b.input) for b in streamed_uses] == [(uses[0].name, uses[0].input)]
    assert final.stop_reason == "tool_use"
    # The result goes back as a tool_result; the model answers in text.
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                   for b in call.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                               "content": "12 degrees celsius, light rain"}]}]
    answer = claude.messages.create(model=MODEL_NAME, max_tokens=60, **GREEDY,
                                    messages=messages, tools=[WEATHER],
                                    tool_choice={"type": "none"})
    assert answer.stop_reason in ("end_turn", "max_tokens"), answer
    assert [b.type for b in answer.content] == ["text"] and text_of(answer).strip(), answer
    # A result for a call nobody made is refused.
    messages[-1]["content"][0]["tool_use_id"] = "toolu_nobody"
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=MODEL_NAME, max_tokens=8, messages=messages)
    assert "toolu_nobody" in e.value.body["error"]["message"]


def test_output_config_format_constrains_the_reply_to_the_schema(claude):
    schema = {"type": "object", "properties": {
        "color": {"type": "string", "enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["color", "count"], "additionalProperties": False}
    for seed_temperature in (0, 1.0):
        r = claude.messages.create(
            model=MODEL_NAME, max_tokens=60, messages=QUESTION,
            output_config={"format": {"type": "json_schema", "schema": schema}},
            extra_body={"temperature": seed_temperature})
        assert r.stop_reason == "end_turn", r
        jsonschema.validate(json.loads(text_of(r)), schema)
    # A schema the grammar library cannot compile is the field's fault.
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=MODEL_NAME, max_tokens=8, messages=QUESTION,
                               output_config={"format": {"type": "json_schema",
                                                         "schema": {"type": "no-such-type"}}})
    assert "output_config.format" in e.value.body["error"]["message"], e.value.body


def test_the_key_may_come_as_x_api_key_and_a_wrong_one_is_a_401_in_anthropics_shape():
    server = Server(api_key="sekret-key")
    try:
        ok = anthropic_client(server).messages.create(model=MODEL_NAME, max_tokens=4,
                                                      messages=QUESTION)
        assert ok.usage.output_tokens > 0
        bearer = anthropic_client(server, api_key=None, auth_token="sekret-key")
        assert bearer.messages.count_tokens(model=MODEL_NAME, messages=QUESTION).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError) as e:
            anthropic_client(server, api_key="wrong").messages.create(
                model=MODEL_NAME, max_tokens=4, messages=QUESTION)
        assert e.value.status_code == 401
        assert e.value.body["type"] == "error"
        assert e.value.body["error"]["type"] == "authentication_error"
        r = httpx.post(server.url + "/v1/messages/count_tokens",
                       json={"model": MODEL_NAME, "messages": QUESTION}, timeout=30)
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    finally:
        assert server.stop() == 0


def deep(depth):
    return ('{"model": "%s", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}], '
            '"metadata": {"user_id": ' % MODEL_NAME + "[" * depth + "]" * depth + "}}").encode()


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgo="}}
BAD = [
    ("missing max_tokens", {"model": MODEL_NAME, "messages": QUESTION}, 400, "max_tokens"),
    ("bad block type", {"model": MODEL_NAME, "max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "hologram", "text": "x"}]}]}, 400, "hologram"),
    ("image block", {"model": MODEL_NAME, "max_tokens": 4, "messages": [
        {"role": "user", "content": [IMAGE, {"type": "text", "text": "What is this?"}]}]},
     400, "images are not supported"),
    ("wrong type", {"model": MODEL_NAME, "max_tokens": "4", "messages": QUESTION}, 400,
     "max_tokens"),
    ("unknown field", {"model": MODEL_NAME, "max_tokens": 4, "messages": QUESTION,
                       "best_of": 2}, 400, "best_of"),
    ("unknown model", {"model": "claude-opus", "max_tokens": 4, "messages": QUESTION}, 404,
     "claude-opus"),
    ("malformed JSON", b'{"model": "x", "max_tokens": ', 400, "JSON"),
    ("deep JSON", deep(100_000), 400, "nest"),
    ("not UTF-8", b'{"model": "\xff"}', 400, "UTF-8"),
]


@pytest.mark.parametrize("name,body,status,words", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_a_4xx_in_anthropics_shape(server, name, body, status, words):
    if isinstance(body, bytes):
        r = httpx.post(server.url + "/v1/messages", content=body, timeout=30,
                       headers={"content-type": "application/json"})
    else:
        r = httpx.post(server.url + "/v1/messages", json=body, timeout=30)
    assert r.status_code == status, r.text
    error = r.json()
    assert error["type"] == "error" and set(error["error"]) == {"type", "message"}, error
    assert error["error"]["type"] == ("not_found_error" if status == 404
                                      else "invalid_request_error")
    assert words in error["error"]["message"], error
    # The server keeps serving.
    ok = httpx.post(server.url + "/v1/messages", timeout=120, json={
        "model": MODEL_NAME, "max_tokens": 2, "messages": QUESTION})
    assert ok.status_code == 200, ok.text


def test_the_client_raises_its_own_errors(claude):
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=MODEL_NAME, max_tokens=4, messages=[
            {"role": "user", "content": [IMAGE]}])
    assert e.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="claude-opus", max_tokens=4, messages=QUESTION)


def test_metrics_and_the_access_log_cover_the_route(server, claude):
    before = server.metrics()
    claude.messages.create(model=MODEL_NAME, max_tokens=3, **GREEDY, messages=QUESTION)
    after = server.metrics()
    key = 'vllm:request_success_total{finished_reason="length"}'
    assert after[key] == before.get(key, 0) + 1
    assert after["vllm:generation_tokens_total"] >= before["vllm:generation_tokens_total"] + 3
    claude.messages.count_tokens(model=MODEL_NAME, messages=QUESTION)
    lines = server.log_text().splitlines()
    assert any(re.search(r"path=/v1/messages status=200 prompt_tokens=[1-9]\d* "
                         r"completion_tokens=3 ", line) for line in lines), lines[-5:]
    assert any("path=/v1/messages/count_tokens status=200" in line for line in lines)
