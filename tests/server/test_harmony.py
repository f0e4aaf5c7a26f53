"""gpt-oss's harmony chat format through a live `drift serve`, read with the official openai client.

The model is tests/data/model/gpt-oss-synthetic.gguf: gpt-oss's architecture with random weights,
but its real tokenizer shape (harmony's special tokens) and gpt-oss's own chat template. Random
weights never write harmony by themselves, so each request carries a grammar (vLLM's
`guided_grammar`, llguidance's Lark) that fixes the reply's *structure* by token id (`<[660]>` is
exactly token 660, the <|channel|> marker) and leaves its *text* to the model inside a small
character class, sampled greedily. Everything else is what a gpt-oss user runs: the template's
prompt, the engine stopping on <|return|> and <|call|> (the grammar goes on after them, so a
server that did not stop would send that text), the server reading channels by id, the OpenAI
shapes. A text completion of the same prompt ids with the same grammar shows the raw reply (the
markers render as text there, as in llama.cpp), which the chat fields are checked against.
"""
import json
import pathlib

import jsonschema
import openai
import pytest

from conftest import ROOT, Server

MODEL = str(ROOT / "tests" / "data" / "model" / "gpt-oss-synthetic.gguf")
NAME = "gpt-oss-synthetic"
MARKERS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
           "<|call|>"]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "maxLength": 12}},
                       "required": ["city"]},
    },
}
MESSAGES = [{"role": "user", "content": "Is it warm in Paris?"}]


@pytest.fixture(scope="module")
def gpt_oss():
    s = Server("--kv-mib", "64", served_model_name=NAME, model=MODEL)
    yield s
    code = s.stop()
    assert code == 0, f"drift serve exited with {code} after SIGTERM:\n{s.log_text()[-4000:]}"


@pytest.fixture(scope="module")
def ids(gpt_oss):
    out = {}
    for marker in MARKERS:
        r = gpt_oss.post("/tokenize", {"prompt": marker, "add_special_tokens": False})
        assert r.status_code == 200, r.text
        assert len(r.json()["tokens"]) == 1, f"{marker} is not one token of the vocabulary"
        out[marker] = r.json()["tokens"][0]
    return out


def reply_grammar(ids):
    """An analysis message, then the final answer, then text past <|return|>."""
    m = {k: "<[%d]>" % v for k, v in ids.items()}
    return (f'start: {m["<|channel|>"]} "analysis" {m["<|message|>"]} /[a-z ]{{4,24}}/ '
            f'{m["<|end|>"]} {m["<|start|>"]} "assistant" {m["<|channel|>"]} "final" '
            f'{m["<|message|>"]} /[a-z ]{{4,24}}/ {m["<|return|>"]} "after the return"\n')


def call_grammar(ids):
    """An analysis message, then a call of get_weather whose arguments follow its schema."""
    m = {k: "<[%d]>" % v for k, v in ids.items()}
    # Compact JSON: a random model would otherwise fill the whitespace JSON allows.
    schema = json.dumps(WEATHER["function"]["parameters"] | {
        "additionalProperties": False, "x-guidance": {"whitespace_flexible": False}})
    return (f'start: {m["<|channel|>"]} "analysis" {m["<|message|>"]} /[a-z ]{{4,24}}/ '
            f'{m["<|end|>"]} {m["<|start|>"]} "assistant" {m["<|channel|>"]} '
            f'"commentary to=functions.get_weather " {m["<|constrain|>"]} "json" '
            f'{m["<|message|>"]} args {m["<|call|>"]} "after the call"\n'
            f"args: %json {schema}\n")


def raw_reply(server, grammar):
    """The same conversation's prompt ids as a text completion: the reply with its markers."""
    prompt = server.post("/tokenize", {"messages": MESSAGES}).json()["tokens"]
    r = server.post("/v1/completions", {"model": NAME, "prompt": prompt, "max_tokens": 120,
                                        "temperature": 0, "guided_grammar": grammar})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def test_reasoning_and_content_from_their_channels(gpt_oss, ids):
    grammar = reply_grammar(ids)
    raw = raw_reply(gpt_oss, grammar)
    head, _, final = raw.partition("<|end|><|start|>assistant<|channel|>final<|message|>")
    assert head.startswith("<|channel|>analysis<|message|>"), raw
    analysis = head.removeprefix("<|channel|>analysis<|message|>")
    assert analysis and final and "after the return" not in raw

    client = gpt_oss.client()
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=120,
                                       temperature=0, extra_body={"guided_grammar": grammar})
    message = r.choices[0].message
    assert message.content == final
    assert message.reasoning_content == analysis
    assert r.choices[0].finish_reason == "stop"
    assert not message.tool_calls

    # Streamed: reasoning deltas, then content deltas, adding up to the same.
    stream = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=120,
                                            temperature=0, stream=True,
                                            extra_body={"guided_grammar": grammar})
    kinds, reasoning, content, finish = [], "", "", None
    for chunk in stream:
        delta = chunk.choices[0].delta
        if getattr(delta, "reasoning_content", None):
            kinds.append("reasoning")
            reasoning += delta.reasoning_content
        if delta.content:
            kinds.append("content")
            content += delta.content
        finish = chunk.choices[0].finish_reason or finish
    assert (reasoning, content, finish) == (analysis, final, "stop")
    assert kinds == sorted(kinds, reverse=True), "every reasoning delta before any content delta"
    assert kinds.count("reasoning") > 1 and kinds.count("content") > 1, "the text streams"


def test_a_commentary_call_is_a_tool_call(gpt_oss, ids):
    grammar = call_grammar(ids)
    client = gpt_oss.client()
    arguments = None
    for stream in (False, True):
        r = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=120,
                                           temperature=0, tools=[WEATHER], stream=stream,
                                           extra_body={"guided_grammar": grammar})
        if stream:
            calls, reasoning, content, finish = [], "", "", None
            for chunk in r:
                delta = chunk.choices[0].delta
                reasoning += getattr(delta, "reasoning_content", None) or ""
                content += delta.content or ""
                calls += delta.tool_calls or []
                finish = chunk.choices[0].finish_reason or finish
        else:
            message = r.choices[0].message
            calls, reasoning, content = message.tool_calls, message.reasoning_content, message.content
            finish = r.choices[0].finish_reason
            assert content is None, f"a reply that only calls has no content: {r}"
        assert finish == "tool_calls"
        assert not content
        assert reasoning and "<|" not in reasoning
        assert len(calls) == 1
        assert calls[0].function.name == "get_weather"
        assert arguments in (None, calls[0].function.arguments), "streamed as whole"
        arguments = calls[0].function.arguments
        jsonschema.validate(json.loads(calls[0].function.arguments),
                            WEATHER["function"]["parameters"])


def test_reasoning_effort_is_checked(gpt_oss):
    client = gpt_oss.client()
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=4,
                                       reasoning_effort="high")
    assert r.choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=4,
                                       extra_body={"reasoning_effort": "extreme"})
    assert e.value.body["param"] == "reasoning_effort"
