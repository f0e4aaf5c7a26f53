"""LLM(kv_cache_dir=...): the KV disk tier from Python. A long prompt's pages are written to the
directory when the engine shuts down and read back by the next engine on it, with the same
greedy tokens; a second engine on a directory in use is refused with the reason."""
import random

import pytest

import drift
from conftest import ENGINE_OPTIONS, MODEL


def test_an_engine_on_the_same_directory_answers_the_same_after_a_restart(tmp_path):
    rng = random.Random(29)
    prompt = {"prompt_token_ids": [rng.randrange(1000, 40000) for _ in range(600)]}
    params = drift.SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)
    options = {**ENGINE_OPTIONS, "kv_cache_dir": str(tmp_path), "kv_cache_dir_gib": 0.5}

    first = drift.LLM(MODEL, **options)
    computed = first.generate([prompt], params)[0].outputs[0].token_ids
    with pytest.raises(ValueError, match="is in use by another drift process"):
        drift.LLM(MODEL, **options)
    first.shutdown()  # the pages RAM still caches are written back
    pages = list(tmp_path.rglob("*.kvp"))
    assert len(pages) >= 600 // 16

    second = drift.LLM(MODEL, **options)
    read_back = second.generate([prompt], params)[0].outputs[0].token_ids
    second.shutdown()
    assert read_back == computed
    assert len(computed) == 8


def test_kv_cache_dir_gib_is_checked(tmp_path):
    with pytest.raises(ValueError, match="kv_cache_dir_gib|kv.disk_gib"):
        drift.LLM(MODEL, **{**ENGINE_OPTIONS, "kv_cache_dir": str(tmp_path),
                            "kv_cache_dir_gib": 0})
