"""Bad parameters raise ValueError/TypeError with the engine's message; a bad or corrupt model
raises drift.EngineError and the interpreter goes on."""
import os
import pathlib
import subprocess
import sys

import pytest

import drift
from conftest import ENGINE_OPTIONS, MODEL, ROOT


@pytest.mark.parametrize("fields, named", [
    ({"temperature": -1.0}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"min_p": -0.1}, "min_p"),
    ({"presence_penalty": 3.0}, "presence_penalty"),
    ({"repetition_penalty": 0.0}, "repetition_penalty"),
    ({"stop_token_ids": [-4]}, "stop_token_ids"),
    ({"logit_bias": {5: 500.0}}, "logit_bias"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"n": 0}, "n"),
    ({"n": 17}, "n"),
    ({"stop": [""]}, "stop"),
    ({"stop": ["x"] * 17}, "stop"),
])
def test_sampling_params_out_of_range_raise_value_error(fields, named):
    with pytest.raises(ValueError, match=named):
        drift.SamplingParams(**fields)


def test_sampling_params_of_the_wrong_type_raise_type_error():
    with pytest.raises(TypeError, match="temperature"):
        drift.SamplingParams(temperature="hot")
    with pytest.raises(TypeError, match="stop"):
        drift.SamplingParams(stop=[3])


def test_requests_the_engine_refuses_raise_value_error(llm):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.generate({"prompt_token_ids": [1, 2, 10**8]})
    with pytest.raises(ValueError, match="logit_bias token"):
        llm.generate("Hi", drift.SamplingParams(logit_bias={10**8: 1.0}))
    with pytest.raises(ValueError, match="max_tokens|context"):
        llm.generate("Hi", drift.SamplingParams(max_tokens=10**7))
    with pytest.raises(ValueError, match="empty|no tokens"):
        llm.generate({"prompt_token_ids": []})
    # One bad prompt in a batch refuses the call; the engine keeps serving.
    with pytest.raises(ValueError):
        llm.generate(["fine", {"prompt_token_ids": [-1]}])
    assert llm.generate("Still", drift.SamplingParams(temperature=0, max_tokens=2))[0].outputs
    stats = llm.stats()
    assert stats["num_running"] == 0 and stats["num_waiting"] == 0


@pytest.mark.parametrize("options, error, named", [
    ({"threads": 0}, ValueError, "threads"),
    ({"parallel": 0}, ValueError, "max_num_seqs"),
    ({"admission": "sometimes"}, ValueError, "admission"),
    ({"preemption": "sometimes"}, ValueError, "preemption"),
    ({"policy": "random"}, ValueError, "policy"),
    ({"kv_cache_dtype": "f8"}, ValueError, "kv_cache_dtype"),
    ({"spec": "eagle"}, ValueError, "spec"),
    ({"kv_mib": -5}, ValueError, "kv_mib"),
    ({"page_size": 0}, ValueError, "page_size"),
    ({"warp_speed": 9}, ValueError, "unknown engine option 'warp_speed'"),
    ({"threads": "two"}, TypeError, "threads"),
    ({"no_prefix_cache": 1}, TypeError, "no_prefix_cache"),
])
def test_engine_options_are_checked(options, error, named):
    with pytest.raises(error, match=named):
        drift.LLM(MODEL, **{**ENGINE_OPTIONS, **options})


def test_missing_model_raises_engine_error(tmp_path):
    with pytest.raises(drift.EngineError, match="does not exist"):
        drift.LLM(str(tmp_path / "absent.gguf"))
    with pytest.raises(drift.EngineError, match="neither a file nor a model name"):
        drift.LLM("no-such-model")


CORRUPT_LOOP = """
import pathlib, sys
import drift
raised = 0
for path in sys.argv[1:]:
    try:
        drift.LLM(path, threads=1, kv_mib=16)
    except drift.EngineError as e:
        assert str(e), path
        raised += 1
print("raised", raised, "of", len(sys.argv) - 1)
"""


def test_corrupt_gguf_files_raise_and_the_interpreter_survives(tmp_path):
    corpus = sorted(str(p) for p in (ROOT / "tests/data/gguf/malformed").glob("*.gguf"))
    # The real model cut in the middle of its tensor data, and with its header bytes scrambled.
    data = pathlib.Path(MODEL).read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(data[: len(data) // 2])
    scrambled = tmp_path / "scrambled.gguf"
    scrambled.write_bytes(data[:24] + bytes(b ^ 0x5A for b in data[24:4096]) + data[4096:])
    files = corpus + [str(truncated), str(scrambled)]
    run = subprocess.run([sys.executable, "-c", CORRUPT_LOOP, *files], capture_output=True,
                         text=True, timeout=300, env=os.environ)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"raised {len(files)} of {len(files)}" in run.stdout


def test_a_chat_template_that_refuses_or_breaks_raises_what_the_server_answers(tmp_path):
    # raise_exception is the template refusing the conversation: the caller's ValueError (the
    # server's 400). A template that breaks while rendering is the operator's: EngineError (500).
    messages = [{"role": "user", "content": "hi"}]
    refuses = tmp_path / "refuses.jinja"
    refuses.write_text("{{ raise_exception('roles must alternate') }}")
    breaks = tmp_path / "breaks.jinja"
    breaks.write_text("{{ messages[0].content.no_such_method() }}")
    refusing = drift.LLM(MODEL, chat_template=refuses, **{**ENGINE_OPTIONS, "kv_mib": 16})
    try:
        with pytest.raises(ValueError, match="roles must alternate"):
            refusing.chat(messages)
    finally:
        refusing.shutdown()
    broken = drift.LLM(MODEL, chat_template=breaks, **{**ENGINE_OPTIONS, "kv_mib": 16})
    try:
        with pytest.raises(drift.EngineError):
            broken.chat(messages)
    finally:
        broken.shutdown()
