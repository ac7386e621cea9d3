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
from kvsize.errors import KvsizeError
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


def round_trips(record: Any) -> bool:
    return bool(msgspec.convert(msgspec.to_builtins(record), type(record), strict=True) == record)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("engine", ENGINES)
def test_estimates_hold_their_declared_types(model: str, engine: str) -> None:
    assert model.lower() in registry_entries()  # offline
    try:
        result = kvsize.estimate(
            model,
            ctx=[8192, 32768],
            batch=[1, 4],
            gpu="h100",
            engine=engine,
            prefix_len=1024,
            tp=1 if engine in ("llamacpp", "hf") else 2,
        )
    except KvsizeError as exc:  # an engine that does not serve the model says so
        pytest.skip(str(exc))
    assert isinstance(result, Estimate)
    assert round_trips(result)


def test_gpu_profiles_hold_their_declared_types() -> None:
    for profile in load_profiles().values():
        assert isinstance(profile, GpuProfile)
        assert round_trips(profile), profile.id
