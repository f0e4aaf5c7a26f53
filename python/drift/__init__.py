"""drift's LLM engine from Python, in vLLM's shape.

    import drift
    llm = drift.LLM()                      # the default model; engine options as keywords
    outs = llm.generate(["Hello"], drift.SamplingParams(temperature=0, max_tokens=32))
    print(outs[0].outputs[0].text)

The engine is the one `drift serve` runs (same tokenizer, chat template, scheduler and
kernels); every prompt of a call is submitted at once so the engine batches them, and the GIL
is released while it works.
"""

from ._drift import EngineError
from .async_llm import AsyncLLM
from .llm import LLM
from .outputs import CompletionOutput, RequestOutput
from .sampling_params import SamplingParams

__all__ = ["LLM", "AsyncLLM", "SamplingParams", "RequestOutput", "CompletionOutput", "EngineError"]
