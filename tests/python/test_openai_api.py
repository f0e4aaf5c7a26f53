"""drift.openai_api, the OpenAI layer drift.ray serves: bodies the engine cannot take are 400s
naming the field, stop strings cut the text (the engine's), and the streamed chunks add up to the
whole response."""
import asyncio
import json

import pytest

from drift.openai_api import OpenAIRoutes, RequestError, parse_request


@pytest.mark.parametrize("body, field", [
    ({"prompt": 3}, "prompt"),
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "temperature": -1}, "temperature"),
    ({"prompt": "x", "n": 100}, "n"),
    ({"prompt": "x", "stop": [""]}, "stop"),
    ({"prompt": "x", "stream": "yes"}, "stream"),
])
def test_bad_fields_are_400s_naming_the_field(body, field):
    with pytest.raises(RequestError) as e:
        parse_request(body, chat=False)
    assert e.value.status == 400 and e.value.param == field, e.value.message
    assert e.value.body()["error"]["param"] == field


def test_chat_messages_are_checked():
    for messages in ([], [{"role": "user"}], ["hi"]):
        with pytest.raises(RequestError) as e:
            parse_request({"messages": messages}, chat=True)
        assert e.value.param == "messages"


def test_stream_chunks_add_up_to_the_whole_response(async_llm):
    routes = OpenAIRoutes(async_llm, "smollm2")
    body = {"prompt": "Count: one, two, three,", "max_tokens": 24, "temperature": 0}

    async def run():
        whole = await routes.complete(parse_request(body, chat=False))
        lines = [line async for line in routes.stream(
            parse_request({**body, "stream": True, "stream_options": {"include_usage": True}},
                          chat=False))]
        return whole, lines

    whole, lines = asyncio.run(run())
    assert lines[-1] == "data: [DONE]\n\n"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text == whole["choices"][0]["text"] and text
    assert chunks[-1]["usage"] == whole["usage"]
    reasons = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert reasons[-1] == whole["choices"][0]["finish_reason"] == "length"

    # A stop string inside the greedy text ends it there, with finish reason "stop".
    text = whole["choices"][0]["text"]
    stop = text[len(text) // 2:len(text) // 2 + 3]
    stopped = asyncio.run(routes.complete(parse_request({**body, "stop": stop}, chat=False)))
    assert stopped["choices"][0]["text"] == text.split(stop)[0]
    assert stopped["choices"][0]["finish_reason"] == "stop"
