"""The core's records (msgspec Structs, kvsize/record.py) hold the types they declare.

Structs do not check types when built in Python, so a float where an int is declared, a list for a tuple, a
str for an enum or a str subclass (torch's TorchVersion) would go unnoticed until JSON encoding or a consumer
broke. Converting each record's builtins back under msgspec's strict rules must give an equal record.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import kvsize
from kvsize.api import Estimate
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.profiles import GpuProfile, load_profiles
from kvsize.registry import registry_entries

MODELS = [
    "meta-llama/Llama-3.1-8B",
    "deepseek-ai/DeepSeek-V3",
    "google/gemma-3-27b-it",
    "Qwen/Qwen3-Next-80B-A3B-Thinking",
    "ai21labs/AI21-Jamba-1.5-Mini",
    "openai/whisper-large-v3",
]
ENGINES = ["vllm", "sglang", "trtllm", "llamacpp", "hf", "formula"]
# The engine x model pairs refused, each with why (the text the refusal must say); every other pair must size,
# so a new refusal of a pair that used to size fails here instead of being skipped.
ENCODER_DECODER = r"kvsize does not model this engine's cache for encoder-decoder models \(whisper\)"
REFUSED = {
    # TensorRT-LLM's PyTorch flow has no Jamba class in MODEL_ARCH_TO_MODULE (_torch/models/_arch_index.py;
    # kvsize/engines/trtllm.py UNSERVED_MODEL_TYPES).
    ("trtllm", "ai21labs/AI21-Jamba-1.5-Mini"): r"TensorRT-LLM \(jamba\): the PyTorch flow has no implementation",
    # Whisper is encoder-decoder: kvsize models its cross-attention cache for vLLM (and the formula) only.
    ("sglang", "openai/whisper-large-v3"): "SGLang: " + ENCODER_DECODER,
    ("trtllm", "openai/whisper-large-v3"): "TensorRT-LLM: " + ENCODER_DECODER,
    ("llamacpp", "openai/whisper-large-v3"): "llama.cpp: " + ENCODER_DECODER,
    ("hf", "openai/whisper-large-v3"): "Hugging Face transformers: " + ENCODER_DECODER,
}


def round_trips(record: Any) -> bool:
    return bool(msgspec.convert(msgspec.to_builtins(record), type(record), strict=True) == record)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("engine", ENGINES)
def test_estimates_hold_their_declared_types(model: str, engine: str) -> None:
    assert model.lower() in registry_entries()  # offline

    def size() -> Estimate:
        return kvsize.estimate(
            model,
            ctx=[8192, 32768],
            batch=[1, 4],
            gpu="h100",
            engine=engine,
            prefix_len=1024,
            tp=1 if engine in ("llamacpp", "hf") else 2,
        )

    reason = REFUSED.get((engine, model))
    if reason is not None:  # an engine that does not serve the model says so, and why
        with pytest.raises(UnsupportedArchitecture, match=reason):
            size()
        return
    result = size()  # any other refusal fails
    assert isinstance(result, Estimate)
    assert round_trips(result)


def test_gpu_profiles_hold_their_declared_types() -> None:
    for profile in load_profiles().values():
        assert isinstance(profile, GpuProfile)
        assert round_trips(profile), profile.id
