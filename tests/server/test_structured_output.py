"""Structured output through the official `openai` client: response_format (json_object,
json_schema), vLLM's guided_json / guided_regex / guided_choice / guided_grammar, and logit_bias.
Outputs are checked with `jsonschema` and `re`, not with anything drift computes."""
import concurrent.futures
import json
import re

import httpx
import jsonschema
import pytest

from conftest import MODEL_NAME

# Nested objects, enums and arrays, bounded so that a 135M model sampling at temperature 1.0
# finishes well inside max_tokens.
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "editor", "viewer"]},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 24},
                "country": {"enum": ["FR", "DE", "US", "JP"]},
            },
            "required": ["city", "country"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    },
    "required": ["name", "age", "role", "address", "tags"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Describe a user of our website as JSON."}]


def test_json_schema_at_temperature_one_always_validates(client):
    def one(seed):
        r = client.chat.completions.create(
            model=MODEL_NAME, messages=ASK, temperature=1.0, max_tokens=200, seed=seed,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": PERSON, "strict": True}})
        return r.choices[0]

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        choices = list(pool.map(one, range(20)))
    for choice in choices:
        assert choice.finish_reason == "stop", choice.message.content
        jsonschema.validate(json.loads(choice.message.content), PERSON)
    # Sampled, not fixed: different seeds give different documents.
    assert len({c.message.content for c in choices}) > 1


def test_guided_json_on_completions_as_a_string(client):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    r = client.completions.create(model=MODEL_NAME, prompt="The answer as JSON:", max_tokens=30,
                                  temperature=1.0, extra_body={"guided_json": json.dumps(schema)})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].text), schema)


def test_json_object_is_parseable(client):
    for seed in range(3):
        r = client.chat.completions.create(
            model=MODEL_NAME, temperature=0.7, seed=seed, max_tokens=120,
            messages=[{"role": "user", "content": "Give a JSON object with a name and an age."}],
            response_format={"type": "json_object"})
        choice = r.choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        assert isinstance(json.loads(choice.message.content), dict)


def test_guided_choice_returns_one_of_the_choices(client):
    choices = ["positive", "negative", "neutral \"quoted\""]
    seen = set()
    for seed in range(6):
        r = client.chat.completions.create(
            model=MODEL_NAME, temperature=1.0, seed=seed, max_tokens=20,
            messages=[{"role": "user", "content": "Is 'I love it' positive or negative?"}],
            extra_body={"guided_choice": choices})
        assert r.choices[0].message.content in choices
        assert r.choices[0].finish_reason == "stop"
        seen.add(r.choices[0].message.content)
    assert seen


def test_guided_regex_output_matches(client):
    pattern = r"[0-9]{3}-[a-z]{2,5}"
    r = client.completions.create(model=MODEL_NAME, prompt="A product code:", max_tokens=20,
                                  temperature=1.0, n=4, extra_body={"guided_regex": pattern})
    for c in r.choices:
        assert re.fullmatch(pattern, c.text), c.text
        assert c.finish_reason == "stop"


def test_guided_grammar_in_lark(client):
    grammar = 'start: "ab" ("+" NUMBER)?\nNUMBER: /[1-9][0-9]?/\n'
    r = client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=20, temperature=1.0,
                                  n=3, extra_body={"guided_grammar": grammar})
    for c in r.choices:
        assert re.fullmatch(r"ab(\+[1-9][0-9]?)?", c.text), c.text


def test_streamed_constrained_output_is_the_same_as_whole(client):
    kw = dict(model=MODEL_NAME, messages=ASK, temperature=1.0, seed=7, max_tokens=200,
              response_format={"type": "json_schema",
                               "json_schema": {"name": "person", "schema": PERSON}})
    whole = client.chat.completions.create(**kw).choices[0].message.content
    parts = [c.choices[0].delta.content or "" for c in
             client.chat.completions.create(stream=True, **kw) if c.choices]
    assert "".join(parts) == whole
    jsonschema.validate(json.loads(whole), PERSON)


def test_recursive_ref_schema_is_served(client):
    tree = {"$defs": {"node": {"type": "object",
                               "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 9},
                                              "kids": {"type": "array", "maxItems": 2,
                                                       "items": {"$ref": "#/$defs/node"}}},
                               "required": ["v", "kids"], "additionalProperties": False}},
            "$ref": "#/$defs/node"}
    r = client.completions.create(model=MODEL_NAME, prompt="A tree:", max_tokens=150,
                                  temperature=0, extra_body={"guided_json": tree})
    if r.choices[0].finish_reason == "stop":
        jsonschema.validate(json.loads(r.choices[0].text), tree)


def first_token(server, prompt):
    r = httpx.post(server.url + "/v1/completions", json={
        "prompt": prompt, "max_tokens": 1, "temperature": 0, "logprobs": 1}, timeout=60).json()
    text = r["choices"][0]["text"]
    ids = server.post("/tokenize", {"prompt": text, "add_special_tokens": False}).json()["tokens"]
    assert len(ids) == 1
    return ids[0], text


def sample_first_tokens(client, prompt, bias, count):
    texts = []
    for seed in range(count // 8):
        r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1, n=8,
                                      temperature=1.0, seed=seed * 8, logit_bias=bias)
        texts += [c.text for c in r.choices]
    return texts


def test_logit_bias_bans_and_forces_a_token(server, client):
    prompt = "The capital of France is"
    favourite, text = first_token(server, prompt)
    unbiased = sample_first_tokens(client, prompt, None, 48)
    assert text in unbiased  # the favourite is drawn often without a bias
    banned = sample_first_tokens(client, prompt, {str(favourite): -100}, 104)
    assert len(banned) == 104 and text not in banned
    # A token the model would not pick: a word from the middle of the vocabulary.
    rare = next(t for t in range(20000, 20100)
                if server.post("/detokenize", {"tokens": [t]}).json()["prompt"].strip().isalpha())
    rare_text = server.post("/detokenize", {"tokens": [rare]}).json()["prompt"]
    assert rare_text not in unbiased
    forced = sample_first_tokens(client, prompt, {str(rare): 100}, 16)
    assert forced == [rare_text] * 16


@pytest.mark.parametrize("body,param", [
    ({"response_format": {"type": "json_schema",
                          "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}},
     "response_format.json_schema.schema"),
    ({"guided_json": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}, "guided_json"),
    ({"guided_regex": "(("}, "guided_regex"),
    ({"guided_grammar": "start: missing_rule"}, "guided_grammar"),
    ({"guided_json": {"type": "object", "properties": {
        f"field_{i}": {"type": "string", "description": "x" * 40} for i in range(2000)}}},
     "guided_json"),
    ({"guided_choice": []}, "guided_choice"),
    ({"logit_bias": {"49152": 5}}, "logit_bias"),
    ({"logit_bias": {str(i): 1 for i in range(1025)}}, "logit_bias"),
])
def test_bad_constraints_are_400_and_the_server_keeps_serving(server, client, body, param):
    r = server.post("/v1/completions", {"prompt": "hi", "max_tokens": 4, **body})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"]
    ok = client.completions.create(model=MODEL_NAME, prompt="hi", max_tokens=2, temperature=0)
    assert ok.choices[0].text is not None
