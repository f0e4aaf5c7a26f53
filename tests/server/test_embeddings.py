"""/v1/embeddings through the official `openai` client: the vectors are the same alone and in a
batch of 32, float and base64 agree, they have unit norm, related texts are closer than unrelated
ones, they agree with llama.cpp's (tests/data/model/embeddings_*.json), bad input gets a 400 that
names the field while the server keeps serving, and /metrics counts the inputs."""
import array
import base64
import json
import math
import pathlib

import openai
import pytest

from conftest import MODEL, MODEL_NAME, ROOT, Server

DIM = 576  # SmolLM2's hidden size
FIXTURE = ROOT / "tests" / "data" / "model" / f"embeddings_{pathlib.Path(MODEL).stem}.json"


def embed(client, inputs, **kw):
    return client.embeddings.create(model=MODEL_NAME, input=inputs, **kw)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def texts(n):
    return [f"Sentence number {i} is about {topic}." for i, topic in
            zip(range(n), ["rivers", "music", "trains", "bread", "stars", "law", "chess", "rain"] * 8)]


def test_response_shape_and_unit_norm(client):
    r = embed(client, ["The cat sat on the mat.", "Hello"], encoding_format="float")
    assert r.object == "list" and r.model == MODEL_NAME
    assert [d.index for d in r.data] == [0, 1]
    assert all(d.object == "embedding" and len(d.embedding) == DIM for d in r.data)
    for d in r.data:
        assert abs(math.sqrt(sum(x * x for x in d.embedding)) - 1) < 1e-5
    assert r.usage.prompt_tokens == r.usage.total_tokens > 2


def test_a_text_is_embedded_the_same_alone_and_in_a_batch_of_32(client):
    batch = texts(32)
    alone = [embed(client, t, encoding_format="float").data[0].embedding for t in batch[:3]]
    together = embed(client, batch, encoding_format="float").data
    assert [d.index for d in together] == list(range(32))
    for i in range(3):
        assert together[i].embedding == alone[i], f"input {i}"
    assert len({tuple(d.embedding) for d in together}) == 32, "different texts, different vectors"


def test_base64_decodes_to_the_float_vectors(client):
    text = ["Quarterly revenue rose by eight percent.", "A short one."]
    floats = [d.embedding for d in embed(client, text, encoding_format="float").data]
    # What the client asks for by default (and decodes itself).
    default = [d.embedding for d in embed(client, text).data]
    raw = embed(client, text, encoding_format="base64").data
    decoded = [array.array("f", base64.b64decode(d.embedding)).tolist() for d in raw]
    assert default == floats
    assert decoded == floats


def test_token_ids_give_the_vector_of_their_text(client, server):
    text = "The quick brown fox jumps over the lazy dog."
    ids = server.post("/tokenize", {"prompt": text}).json()["tokens"]
    by_text = embed(client, text, encoding_format="float").data[0].embedding
    by_ids = embed(client, ids, encoding_format="float").data[0].embedding
    by_id_lists = embed(client, [ids, ids[:3]], encoding_format="float").data
    assert by_ids == by_text == by_id_lists[0].embedding
    assert by_id_lists[1].embedding != by_text


def test_related_texts_are_closer_than_unrelated_ones(client):
    d = embed(client, ["The cat sat on the mat.", "A cat was sitting on the rug.",
                       "Quarterly revenue rose by eight percent, driven by strong sales in Asia."],
              encoding_format="float").data
    cat, cat2, revenue = (x.embedding for x in d)
    assert cosine(cat, cat2) > cosine(cat, revenue)
    assert cosine(cat2, cat) > cosine(cat2, revenue)


def test_dimensions_and_user(client):
    assert len(embed(client, "x y z", dimensions=DIM, user="someone").data[0].embedding) == DIM
    with pytest.raises(openai.BadRequestError) as e:
        embed(client, "x y z", dimensions=64)
    assert e.value.body["param"] == "dimensions"


def test_agrees_with_llama_cpp(client):
    # llama-embedding --pooling mean --embd-normalize 2 (scripts/fixtures/make_embedding_fixtures.py).
    # Tolerance, derived: drift must be as close to llama.cpp as llama.cpp is to itself when only
    # its rounding changes (the same build with flash attention off; the fixture records that
    # cosine for every text). The worst such distance over the texts, 1 - 0.99903, is the bound;
    # drift measured 1 - 0.99972 at worst. A wrong pooling is far outside it: the last or first
    # token's vector of these texts is at a cosine of 0.58 to 0.82 from their mean.
    fixture = json.loads(FIXTURE.read_text())
    assert fixture["pooling"] == "mean"
    bound = max(1 - e["self_cosine_flash_attn_off"] for e in fixture["entries"])
    assert 0 < bound < 0.01
    for entry in fixture["entries"]:
        r = embed(client, entry["text"], encoding_format="float")
        assert r.usage.prompt_tokens == len(entry["token_ids"]), entry["text"][:40]
        got = r.data[0].embedding
        assert 1 - cosine(got, entry["embedding"]) <= bound, entry["text"][:40]


E = "/v1/embeddings"


def body(**kw):
    return {"model": MODEL_NAME, "input": "Hello", **kw}


BAD = [
    ("input missing", {"model": MODEL_NAME}, "input"),
    ("empty string", body(input=""), "input"),
    ("empty list", body(input=[]), "input"),
    ("empty string in a list", body(input=["a", ""]), "input"),
    ("empty token list in a list", body(input=[[1, 2], []]), "input"),
    ("number", body(input=5), "input"),
    ("object", body(input={"text": "a"}), "input"),
    ("mixed list", body(input=["a", 3]), "input"),
    ("float token", body(input=[1.5, 2]), "input"),
    ("negative token", body(input=[1, -1]), "input"),
    ("token outside the vocabulary", body(input=[1, 49152]), "input"),
    ("too many inputs", body(input=["a"] * 2049), "input"),
    # SmolLM2's context is 8192 tokens (the server's default, as the KV cache holds it).
    ("too long input", body(input=[1] * 8193), "input"),
    ("too long text", body(input="word " * 9000), "input"),
    ("encoding_format", body(encoding_format="hex"), "encoding_format"),
    ("encoding_format type", body(encoding_format=1), "encoding_format"),
    ("dimensions", body(dimensions=100), "dimensions"),
    ("dimensions zero", body(dimensions=0), "dimensions"),
    ("dimensions type", body(dimensions="576"), "dimensions"),
    ("user type", body(user=5), "user"),
]


@pytest.mark.parametrize("name,request_body,param", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_a_400_naming_the_field_and_the_server_keeps_serving(server, client, name,
                                                                          request_body, param):
    r = server.post(E, request_body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error"
    assert len(embed(client, "still here").data[0].embedding) == DIM


def test_unknown_model_is_a_404(server):
    r = server.post(E, body(model="other"))
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_metrics_count_the_inputs(client, server):
    before = server.metrics()
    r = embed(client, ["one", "two", "three"])
    after = server.metrics()
    assert after["drift:embeddings_total"] - before["drift:embeddings_total"] == 3
    assert (after["drift:embedding_prompt_tokens_total"]
            - before["drift:embedding_prompt_tokens_total"]) == r.usage.prompt_tokens


def test_pooling_flag_selects_the_last_token():
    s = Server("--kv-mib", "64", "--pooling", "last")
    try:
        c = s.client()
        text = "The cat sat on the mat."
        last = embed(c, text, encoding_format="float").data[0].embedding
        # The last token's state: a prefix of the text ending elsewhere gives another vector,
        # and the same text again the same one (the prefix cache serves it).
        assert embed(c, text, encoding_format="float").data[0].embedding == last
        assert embed(c, text[:-1], encoding_format="float").data[0].embedding != last
        assert abs(math.sqrt(sum(x * x for x in last)) - 1) < 1e-5
    finally:
        assert s.stop() == 0
