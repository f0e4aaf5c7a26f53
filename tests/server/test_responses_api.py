"""OpenAI's Responses API (`POST /v1/responses`, `GET`/`DELETE /v1/responses/{id}`) through the
official `openai` client against a live `drift serve` on the default model: whole and streamed
replies agree with each other and with /v1/chat/completions' greedy text for the same
conversation; a conversation continued through previous_response_id equals the same conversation
sent whole, and its second turn reports the prefix cache's tokens; a function tool round trip;
text.format json_schema output that validates; stored responses can be fetched and deleted; bad
input gets a 4xx in OpenAI's shape naming its field while the server keeps serving."""
import json

import httpx
import jsonschema
import openai
import pytest

from conftest import MODEL_NAME, Server

GREEDY = {"temperature": 0}
INSTRUCTIONS = ("You are a brief assistant. Answer every question in one short sentence, "
                "without lists, and do not repeat the question back to the user.")
QUESTION = "Name three colors of the rainbow."
WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather in a city",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "maxLength": 40},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
               "required": ["city"], "additionalProperties": False},
           "strict": True}


def chat_text(client, messages, max_tokens):
    r = client.chat.completions.create(model=MODEL_NAME, messages=messages,
                                       max_tokens=max_tokens, temperature=0)
    return r.choices[0].message.content, r


def test_a_response_its_stream_and_the_chat_completion_agree(server, client):
    whole = client.responses.create(model=MODEL_NAME, instructions=INSTRUCTIONS, input=QUESTION,
                                    max_output_tokens=24, **GREEDY)
    assert whole.id.startswith("resp_") and whole.object == "response" and whole.created_at > 0
    assert whole.status in ("completed", "incomplete") and whole.model == MODEL_NAME
    assert [item.type for item in whole.output] == ["message"]
    assert whole.output_text.strip()
    assert whole.instructions == INSTRUCTIONS and whole.max_output_tokens == 24
    usage = whole.usage
    assert usage.input_tokens > 0 and 0 < usage.output_tokens <= 24
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    chat, completion = chat_text(client, [{"role": "system", "content": INSTRUCTIONS},
                                          {"role": "user", "content": QUESTION}], 24)
    assert whole.output_text == chat
    assert usage.input_tokens == completion.usage.prompt_tokens
    assert usage.output_tokens == completion.usage.completion_tokens
    with client.responses.stream(model=MODEL_NAME, instructions=INSTRUCTIONS, input=QUESTION,
                                 max_output_tokens=24, **GREEDY) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert final.output_text == whole.output_text and final.status == whole.status
    assert final.usage.output_tokens == usage.output_tokens
    names = [e.type for e in events]
    assert names[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"], names
    assert names[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done",
                          "response.completed" if whole.status == "completed"
                          else "response.incomplete"], names
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text


def test_max_output_tokens_makes_the_response_incomplete(client):
    r = client.responses.create(model=MODEL_NAME, input=QUESTION, max_output_tokens=3, **GREEDY)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens", r
    assert r.usage.output_tokens == 3
    # Streamed, the last event says so (as OpenAI's: response.incomplete, not .completed).
    events = list(client.responses.create(model=MODEL_NAME, input=QUESTION, max_output_tokens=3,
                                          stream=True, **GREEDY))
    assert events[-1].type == "response.incomplete", [e.type for e in events]
    last = events[-1].response
    assert last.status == "incomplete" and last.incomplete_details.reason == "max_output_tokens"
    assert last.output_text == r.output_text and last.usage.output_tokens == 3


def test_a_continued_conversation_equals_it_sent_whole_and_reuses_the_cache(client):
    first = client.responses.create(model=MODEL_NAME, instructions=INSTRUCTIONS, input=QUESTION,
                                    max_output_tokens=16, **GREEDY)
    follow_up = "And one more color?"
    second = client.responses.create(model=MODEL_NAME, instructions=INSTRUCTIONS,
                                     previous_response_id=first.id, input=follow_up,
                                     max_output_tokens=16, **GREEDY)
    assert second.previous_response_id == first.id
    whole = client.responses.create(
        model=MODEL_NAME, instructions=INSTRUCTIONS, max_output_tokens=16, **GREEDY,
        input=[{"role": "user", "content": QUESTION},
               {"role": "assistant", "content": first.output_text},
               {"role": "user", "content": follow_up}])
    assert second.output_text == whole.output_text
    assert second.usage.input_tokens == whole.usage.input_tokens
    # Stateless, the client's way: the first response's output items sent back as input.
    resent = client.responses.create(
        model=MODEL_NAME, instructions=INSTRUCTIONS, max_output_tokens=16, store=False, **GREEDY,
        input=[{"role": "user", "content": QUESTION}, *[item.model_dump() for item in first.output],
               {"role": "user", "content": follow_up}])
    assert resent.output_text == second.output_text
    # The earlier turns' KV came from the prefix cache: the first turn's prompt, whole pages.
    cached = second.usage.input_tokens_details.cached_tokens
    assert cached >= first.usage.input_tokens // 2, (cached, first.usage)
    assert cached < second.usage.input_tokens
    # The same chat completion: the conversation rendered by the same template.
    chat, _ = chat_text(client, [{"role": "system", "content": INSTRUCTIONS},
                                 {"role": "user", "content": QUESTION},
                                 {"role": "assistant", "content": first.output_text},
                                 {"role": "user", "content": follow_up}], 16)
    assert second.output_text == chat


def test_a_function_tool_round_trip(client):
    question = "What is the weather in Oslo?"
    call = client.responses.create(model=MODEL_NAME, input=question, tools=[WEATHER],
                                   tool_choice={"type": "function", "name": "get_weather"},
                                   max_output_tokens=80, **GREEDY)
    calls = [item for item in call.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather", call.output
    assert calls[0].call_id.startswith("call_") and calls[0].id.startswith("fc_")
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER["parameters"])
    # Streamed: the same call, its arguments in function_call_arguments events.
    with client.responses.stream(model=MODEL_NAME, input=question, tools=[WEATHER],
                                 tool_choice="required", max_output_tokens=80,
                                 **GREEDY) as stream:
        events = list(stream)
        final = stream.get_final_response()
    streamed = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, c.arguments) for c in streamed] == [(calls[0].name, calls[0].arguments)]
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [e.arguments for e in done] == [calls[0].arguments]
    # The output goes back as a function_call_output item of a continued response.
    answer = client.responses.create(
        model=MODEL_NAME, previous_response_id=call.id, tools=[WEATHER], tool_choice="none",
        input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                "output": "12 degrees celsius, light rain"}],
        max_output_tokens=30, **GREEDY)
    assert [item.type for item in answer.output] == ["message"] and answer.output_text.strip()
    # The same, with the whole conversation as items.
    whole = client.responses.create(
        model=MODEL_NAME, tools=[WEATHER], tool_choice="none", max_output_tokens=30, **GREEDY,
        input=[{"role": "user", "content": question},
               {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather",
                "arguments": calls[0].arguments},
               {"type": "function_call_output", "call_id": calls[0].call_id,
                "output": "12 degrees celsius, light rain"}])
    assert whole.output_text == answer.output_text
    # And with the call's output items as the SDK dumps them.
    dumped = client.responses.create(
        model=MODEL_NAME, tools=[WEATHER], tool_choice="none", max_output_tokens=30, **GREEDY,
        input=[{"role": "user", "content": question},
               *[item.model_dump() for item in call.output],
               {"type": "function_call_output", "call_id": calls[0].call_id,
                "output": "12 degrees celsius, light rain"}])
    assert dumped.output_text == answer.output_text
    # An output for a call nobody made is refused.
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL_NAME, max_output_tokens=4, input=[
            {"type": "function_call_output", "call_id": "call_nobody", "output": "x"}])
    assert "call_nobody" in e.value.body["message"]


def test_text_format_json_schema_output_validates(client):
    schema = {"type": "object", "properties": {
        "color": {"type": "string", "enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["color", "count"], "additionalProperties": False}
    r = client.responses.create(
        model=MODEL_NAME, input=QUESTION, max_output_tokens=40, **GREEDY,
        text={"format": {"type": "json_schema", "name": "pick", "schema": schema,
                         "strict": True}})
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), schema)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL_NAME, input=QUESTION, max_output_tokens=4, text={
            "format": {"type": "json_schema", "name": "x", "schema": {"type": "no-such-type"}}})
    assert e.value.body["param"] == "text.format.schema", e.value.body


def test_stored_responses_can_be_fetched_and_deleted_and_unstored_ones_cannot(client):
    r = client.responses.create(model=MODEL_NAME, input=QUESTION, max_output_tokens=4,
                                metadata={"ticket": "42"}, **GREEDY)
    assert r.metadata == {"ticket": "42"} and r.store is True
    fetched = client.responses.retrieve(r.id)
    assert fetched.id == r.id and fetched.output_text == r.output_text
    assert fetched.usage.output_tokens == r.usage.output_tokens
    deleted = httpx.delete(f"{client.base_url}responses/{r.id}", timeout=30)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"id": r.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model=MODEL_NAME, input="more", previous_response_id=r.id)
    assert e.value.body["param"] == "previous_response_id", e.value.body
    assert e.value.body["code"] == "previous_response_not_found", e.value.body
    unstored = client.responses.create(model=MODEL_NAME, input=QUESTION, max_output_tokens=4,
                                       store=False, **GREEDY)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL_NAME, input="more",
                                previous_response_id=unstored.id)


@pytest.mark.parametrize("fields, param", [
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "https://example.com/cat.png"}]}]},
     "input[0].content[0].type"),
    ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
    ({"input": 7}, "input"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ({"frobnicate": True}, "frobnicate"),
])
def test_bad_input_is_a_400_naming_the_field(server, fields, param):
    body = {"model": MODEL_NAME, "input": QUESTION, "max_output_tokens": 4, **fields}
    r = httpx.post(server.url + "/v1/responses", json=body, timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    if "input_image" in json.dumps(fields):
        assert "text only" in error["message"]
    assert httpx.get(server.url + "/health", timeout=5).status_code == 200


def test_unknown_ids_methods_and_keys():
    server = Server(api_key="sekret-key")
    try:
        client = server.client()
        r = client.responses.create(model=MODEL_NAME, input=QUESTION, max_output_tokens=2)
        assert httpx.get(f"{server.url}/v1/responses/{r.id}", timeout=5).status_code == 401
        assert client.responses.retrieve(r.id).id == r.id
        put = httpx.put(f"{server.url}/v1/responses/{r.id}", timeout=5,
                        headers={"Authorization": "Bearer sekret-key"})
        assert put.status_code == 405
        with pytest.raises(openai.NotFoundError) as e:
            client.responses.retrieve("resp_nobody")
        assert "resp_nobody" in e.value.body["message"]
    finally:
        assert server.stop() == 0


def test_the_store_evicts_the_oldest_beyond_its_count():
    server = Server("--responses-max-count", "2")
    try:
        client = server.client()
        ids = [client.responses.create(model=MODEL_NAME, input=QUESTION,
                                       max_output_tokens=1).id for _ in range(3)]
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(ids[0])
        assert [client.responses.retrieve(i).id for i in ids[1:]] == ids[1:]
        metrics = server.metrics()
        assert metrics["drift:stored_responses"] == 2
        assert metrics["drift:stored_response_evictions_total"] == 1
        assert metrics["drift:stored_response_bytes"] > 0
    finally:
        assert server.stop() == 0
