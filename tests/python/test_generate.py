"""LLM.generate and LLM.chat: the same text as the drift program, batching, vLLM's shapes."""
import pathlib
import subprocess
import threading

import jinja2
import jinja2.sandbox
import pytest

import drift
from conftest import DRIFT_BIN, MODEL, ROOT

GREEDY = drift.SamplingParams(temperature=0, max_tokens=32)
PROMPTS = [f"Here is a list of {i + 3} fruits:" for i in range(16)] + [
    f"Write one sentence about the number {i}." for i in range(16)]


def test_greedy_text_equals_drift_generate(llm):
    prompt = "The capital of France is"
    out = llm.generate(prompt, GREEDY)
    cli = subprocess.run([DRIFT_BIN, "generate", "-m", MODEL, "-p", prompt, "--temp", "0",
                          "-n", "32", "-t", "2"], capture_output=True, text=True, timeout=120,
                         check=True)
    assert len(out) == 1
    assert out[0].prompt == prompt
    completion = out[0].outputs[0]
    assert completion.text == cli.stdout.removesuffix("\n")
    assert completion.text.strip()
    assert completion.finish_reason in ("stop", "length")
    if completion.finish_reason == "length":
        assert len(completion.token_ids) == 32
    assert out[0].prompt_token_ids[0] != out[0].prompt_token_ids[1]


def test_spec_drafts_and_leaves_greedy_text_unchanged():
    from conftest import ENGINE_OPTIONS
    prompt = "Copy: one two three four, one two three four, one two three four, one two"
    params = drift.SamplingParams(temperature=0, max_tokens=48, ignore_eos=True)
    texts = {}
    for spec in ("none", "ngram"):
        engine = drift.LLM(MODEL, spec=spec, **ENGINE_OPTIONS)
        texts[spec] = engine.generate(prompt, params)[0].outputs[0].text
        stats = engine.stats()
        engine.shutdown()
        if spec == "none":
            assert stats["spec_draft_tokens"] == 0
        else:
            assert stats["spec_accepted_tokens"] > 0
    assert texts["ngram"] == texts["none"]


def test_spec_draft_model_drafts_and_leaves_greedy_text_unchanged():
    from conftest import ENGINE_OPTIONS
    prompt = "Write a short poem about the sea."
    params = drift.SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    plain = drift.LLM(MODEL, spec="none", **ENGINE_OPTIONS)
    expected = plain.generate(prompt, params)[0].outputs[0].text
    plain.shutdown()
    # SmolLM2 drafting for itself: its drafts are the target's argmax, (nearly) all accepted.
    engine = drift.LLM(MODEL, spec="draft", spec_draft_model=str(MODEL), **ENGINE_OPTIONS)
    assert engine.generate(prompt, params)[0].outputs[0].text == expected
    stats = engine.stats()
    engine.shutdown()
    assert stats["spec_draft_model_draft_tokens"] > 10
    assert stats["spec_draft_model_accepted_tokens"] >= 0.9 * stats["spec_draft_model_draft_tokens"]
    with pytest.raises(Exception, match="spec-draft-model|spec_draft_model"):
        drift.LLM(MODEL, spec="draft", **ENGINE_OPTIONS)


def test_spec_pool_size_is_an_option_and_drafts_a_repeated_answer():
    from conftest import ENGINE_OPTIONS
    prompt = "Name the planets of the solar system in order."
    params = drift.SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    runs = {}
    for mib in (0, 1):
        engine = drift.LLM(MODEL, spec="ngram", spec_pool_mib=mib, **ENGINE_OPTIONS)
        texts = [engine.generate(prompt, params)[0].outputs[0].text for _ in range(2)]
        runs[mib] = (texts, engine.stats())
        engine.shutdown()
    assert runs[0][0] == runs[1][0]
    assert runs[0][1]["spec_pool_bytes"] == 0 and runs[0][1]["spec_pool_draft_tokens"] == 0
    assert runs[1][1]["spec_pool_bytes"] == 1 << 20
    assert runs[1][1]["spec_pool_accepted_tokens"] > 0  # the second answer, drafted from the first
    with pytest.raises(ValueError, match="spec_pool_mib"):
        drift.LLM(MODEL, spec="ngram", spec_pool_mib=-1, **ENGINE_OPTIONS)


def test_32_prompts_in_one_call_equal_32_calls_of_one(llm):
    params = drift.SamplingParams(temperature=0, max_tokens=12)
    steps_before = llm.stats()["steps"]
    batched = llm.generate(PROMPTS, params)
    steps_batched = llm.stats()["steps"] - steps_before
    single = [llm.generate(p, params)[0] for p in PROMPTS]
    steps_single = llm.stats()["steps"] - steps_before - steps_batched
    assert [o.prompt for o in batched] == PROMPTS
    assert sum(len(b.outputs[0].token_ids) for b in batched) > 8 * len(PROMPTS)
    for b, s in zip(batched, single):
        assert b.outputs[0].token_ids == s.outputs[0].token_ids, b.prompt
        assert b.outputs[0].text == s.outputs[0].text
        assert b.prompt_token_ids == s.prompt_token_ids
    # Batched: the engine ran the 32 requests together (16 at a time with parallel=16), so
    # far fewer steps than one request after the other.
    assert steps_batched * 4 < steps_single, (steps_batched, steps_single)


def test_the_gil_is_released_while_the_engine_works(llm):
    done = threading.Event()
    outputs = []

    def generate():
        outputs.extend(llm.generate(PROMPTS[:8], drift.SamplingParams(
            temperature=0, max_tokens=24, ignore_eos=True)))
        done.set()

    worker = threading.Thread(target=generate)
    worker.start()
    # This thread runs Python while requests run: a call that held the GIL would let it in only
    # before the batch started or after it ended, when nothing runs.
    seen_running = 0
    while not done.is_set():
        if llm.stats()["num_running"] > 0:
            seen_running += 1
    worker.join()
    assert [len(o.outputs[0].token_ids) for o in outputs] == [24] * 8
    assert seen_running >= 10, (seen_running, llm.stats())


def test_n_sequences_with_a_seed_are_reproducible(llm):
    params = drift.SamplingParams(n=3, temperature=0.9, seed=7, max_tokens=8)
    first = llm.generate("Once upon a time", params)[0]
    again = llm.generate("Once upon a time", params)[0]
    assert [o.index for o in first.outputs] == [0, 1, 2]
    assert [o.token_ids for o in first.outputs] == [o.token_ids for o in again.outputs]
    assert len({tuple(o.token_ids) for o in first.outputs}) > 1


def test_choice_i_of_n_is_the_request_with_seed_plus_i(llm):
    # The engine's one fan-out (the server's too): choice i samples with seed + i.
    n_params = drift.SamplingParams(n=3, temperature=0.9, seed=11, max_tokens=8)
    outputs = llm.generate("Once upon a time", n_params)[0].outputs
    for i, choice in enumerate(outputs):
        alone = llm.generate("Once upon a time", drift.SamplingParams(
            temperature=0.9, seed=11 + i, max_tokens=8))[0].outputs[0]
        assert choice.token_ids == alone.token_ids, i


def test_token_id_prompts_and_stop_token_ids(llm):
    text = llm.generate("Hello, my name is", GREEDY)[0]
    by_ids = llm.generate({"prompt_token_ids": text.prompt_token_ids}, GREEDY)[0]
    assert by_ids.outputs[0].token_ids == text.outputs[0].token_ids
    # Stopping on the third generated token: it ends the output and is its stop_reason.
    stop_id = text.outputs[0].token_ids[2]
    stopped = llm.generate("Hello, my name is", drift.SamplingParams(
        temperature=0, max_tokens=32, stop_token_ids=[stop_id]))[0].outputs[0]
    assert stopped.finish_reason == "stop"
    assert stopped.stop_reason == stop_id
    assert stopped.token_ids == text.outputs[0].token_ids[:stopped.token_ids.index(stop_id) + 1]


def test_stop_strings_end_the_text_in_the_engine(llm):
    whole = llm.generate("Count: one, two, three,", GREEDY)[0].outputs[0]
    stop = whole.text[len(whole.text) // 2:len(whole.text) // 2 + 3]
    finished_before = llm.stats()["finished"]
    out = llm.generate("Count: one, two, three,", drift.SamplingParams(
        temperature=0, max_tokens=32, stop=["never-there", stop]))[0].outputs[0]
    assert out.text == whole.text.split(stop)[0]
    assert out.finish_reason == "stop" and out.stop_reason == stop
    # The engine ended it "stop" (it used to be a cancel of a sequence a Python matcher cut).
    finished = llm.stats()["finished"]
    assert finished["stop"] == finished_before["stop"] + 1
    assert finished["cancelled"] == finished_before["cancelled"]
    # Its tokens are the ones generated up to the one that completed the stop string.
    assert out.token_ids == whole.token_ids[:len(out.token_ids)]
    assert len(out.token_ids) < len(whole.token_ids)


def test_chat_renders_the_models_template_as_jinja2_does(llm):
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name a colour."}]
    template = (ROOT / "tests/data/templates/HuggingFaceTB-SmolLM2-135M-Instruct.jinja").read_text()
    # The environment Hugging Face transformers renders chat templates in.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    expected = env.from_string(template).render(
        messages=messages, add_generation_prompt=True, bos_token="", eos_token="<|im_end|>")
    out = llm.chat(messages, GREEDY)
    assert len(out) == 1
    assert out[0].prompt == expected
    assert out[0].outputs[0].text.strip()
    # The same conversation through the template is the same prompt as its rendered text.
    assert llm.generate(expected, GREEDY)[0].prompt_token_ids == out[0].prompt_token_ids
    two = llm.chat([messages, messages[1:]], GREEDY)
    assert two[0].outputs[0].text == out[0].outputs[0].text
    assert len(two) == 2 and two[1].prompt != two[0].prompt


def test_model_none_and_names_resolve_like_the_cli(tmp_path, monkeypatch):
    from drift.models import resolve_model

    # The registry's default and its name are the cached file `drift -m` would use.
    monkeypatch.setenv("DRIFT_CACHE", str(pathlib.Path(MODEL).parent))
    assert resolve_model(None) == MODEL
    assert resolve_model("smollm2-135m-instruct:q4_1") == MODEL
    # A registered model that is not cached is not downloaded: the error says how to get it.
    monkeypatch.setenv("DRIFT_CACHE", str(tmp_path))
    with pytest.raises(drift.EngineError, match="drift pull smollm2-135m-instruct:q4_1"):
        drift.LLM()
