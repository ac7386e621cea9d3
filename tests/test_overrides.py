"""What users pass that changes the answer (issue 22): --hf-overrides / --json-model-override-args merged into the
config as vLLM merges them, RoPE/YaRN maxima per vLLM release, and the engines' long-context switches read as each
engine reads its environment variable (kvsize/overrides.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvsize.api import estimate
from kvsize.engines import get_engine
from kvsize.errors import UsageError
from kvsize.fit import context_limit, engine_max_context
from kvsize.overrides import apply_overrides, long_context_switch, parse_overrides
from kvsize.resolve import load_model_config

# Qwen3-8B's config.json: max_position_embeddings 40960, rope_scaling null. Qwen's model card enables YaRN with
# factor 4 over original_max_position_embeddings 32768 to serve 131,072 tokens.
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def qwen3(**overrides: object) -> dict[str, object]:
    return apply_overrides(load_model_config("Qwen/Qwen3-8B").raw, overrides)


def test_apply_overrides_replaces_fields_and_updates_sub_configs() -> None:
    # vLLM 0.33.0 config/model.py ModelConfig.__post_init__ + _apply_dict_overrides: flat keys config.update(), a
    # nested PreTrainedConfig key by key, a dict-valued field (rope_scaling) replaced whole.
    raw = {"rope_scaling": {"rope_type": "linear", "factor": 2.0, "x": 1}, "text_config": {"a": 1, "b": 2}, "n": 3}
    out = apply_overrides(raw, {"rope_scaling": {"rope_type": "yarn"}, "text_config": {"b": 5}, "n": 4})
    assert out == {"rope_scaling": {"rope_type": "yarn"}, "text_config": {"a": 1, "b": 5}, "n": 4}
    assert raw["n"] == 3  # the loaded config is not changed in place


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[1]", "must be a JSON object"),
        ("{bad", "is not JSON"),
        ('{"factor": NaN}', "is not JSON"),
        ('{"rope_scaling": {"factor": 1e999}}', "is not JSON"),  # inf: out of range
        ('{"rope_scaling": 4}', "must be a JSON object or null"),
        ("1" * 70_000, "longer than"),
    ],
)
def test_bad_overrides_are_refused(text: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        parse_overrides(text)


@pytest.mark.parametrize(
    ("release", "maximum"),
    [
        # <= 0.29 config/model.py _get_and_verify_max_len: yarn is scaled, from original_max_position_embeddings:
        # derived = 32768, x factor 4 = 131,072.
        ("0.29.0", 131_072),
        ("0.19.1", 131_072),
        # 0.30+: "YaRN variants leave max_position_embeddings already scaled": 40,960 unscaled.
        ("0.30.0", 40_960),
        ("0.33.0", 40_960),
    ],
)
def test_vllm_yarn_maximum_by_release(release: str, maximum: int) -> None:
    from kvsize.config import parse_config

    spec = parse_config(qwen3(rope_scaling=YARN))
    assert engine_max_context(get_engine("vllm", release), spec) == maximum


def test_vllm_030_takes_the_stated_maximum_with_yarn() -> None:
    from kvsize.config import parse_config

    spec = parse_config(qwen3(rope_scaling=YARN, max_position_embeddings=131_072))
    assert engine_max_context(get_engine("vllm", "0.33.0"), spec) == 131_072
    # SGLang: int(factor x length) unless the entry states original_max_position_embeddings (it does): 131,072.
    assert engine_max_context(get_engine("sglang"), spec) == 131_072


def test_api_serves_128k_with_yarn_overrides() -> None:
    plain = estimate("Qwen/Qwen3-8B", ctx=131_072, gpu="h100", engine_version="0.19.1", environment={})
    assert not plain.scenarios[0].gpu.fits  # past the maximum of 40,960: vLLM refuses at start-up
    yarn = estimate(
        "Qwen/Qwen3-8B",
        ctx=131_072,
        gpu="h100",
        engine_version="0.19.1",
        hf_overrides={"rope_scaling": YARN},
        environment={},
    )
    assert yarn.scenarios[0].gpu.fits
    assert any("config overrides applied" in n and "rope_scaling" in n for n in yarn.notes)
    # The cache itself does not change: 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 147,456 B per token.
    assert yarn.scenarios[0].kv_bytes_per_token == plain.scenarios[0].kv_bytes_per_token == 147_456


@pytest.mark.parametrize(
    ("engine", "variable", "value", "honoured"),
    [
        ("vllm", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1", True),
        ("vllm", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", " TRUE ", True),  # envs.py: .strip().lower() in ("1", "true")
        ("vllm", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "yes", False),
        ("vllm", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0", False),
        ("sglang", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "True", True),  # get_bool_env_var: .lower()
        ("sglang", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", " 1", False),  # no strip
        ("trtllm", "TLLM_ALLOW_LONG_MAX_MODEL_LEN", "y", True),  # _init_max_seq_len: in ["1","true","yes","y"]
        ("trtllm", "TLLM_ALLOW_LONG_MAX_MODEL_LEN", "on", False),
        ("llamacpp", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1", False),  # llama.cpp has no such switch
    ],
)
def test_long_context_switch_as_each_engine_reads_it(engine: str, variable: str, value: str, honoured: bool) -> None:
    assert (long_context_switch(engine, {variable: value}) is not None) is honoured


def test_switch_set_turns_the_refusal_into_a_warning() -> None:
    from kvsize.api import engine_context
    from kvsize.config import parse_config

    spec = parse_config(qwen3())
    refused = context_limit(get_engine("vllm").with_context(engine_context(None, None, {})), spec, 131_072)
    assert refused is not None and refused.refuses and refused.maximum == 40_960
    allowed_ctx = engine_context(None, None, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    allowed = context_limit(get_engine("vllm").with_context(allowed_ctx), spec, 131_072)
    assert allowed is not None and not allowed.refuses
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set" in allowed.action
    # the switch of one engine does not reach another
    sglang = context_limit(get_engine("sglang").with_context(allowed_ctx), spec, 131_072)
    assert sglang is not None and sglang.refuses


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_MAX_MODEL_LEN", "LONGER_CONTEXT_LEN"))}
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", **(env or {})},
    )


def test_cli_yarn_and_the_switch() -> None:
    yarn = json.dumps({"rope_scaling": YARN})
    past = run("Qwen/Qwen3-8B", "--ctx", "131072", "--gpu", "h100")
    assert past.returncode == 1 and "past the model's maximum context 40,960" in past.stdout
    # vLLM 0.33.0 leaves YaRN unscaled: still refused, and the message says what to add.
    still = run("Qwen/Qwen3-8B", "--ctx", "131072", "--gpu", "h100", "--hf-overrides", yarn)
    assert still.returncode == 1
    assert '"max_position_embeddings": 131072 to --hf-overrides' in " ".join(still.stdout.split())
    both = json.dumps({"rope_scaling": YARN, "max_position_embeddings": 131072})
    ok = run("Qwen/Qwen3-8B", "--ctx", "131072", "--gpu", "h100", "--json-model-override-args", both)
    assert ok.returncode == 0, ok.stdout
    switched = run("Qwen/Qwen3-8B", "--ctx", "131072", "--gpu", "h100", env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert switched.returncode == 0 and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set" in " ".join(switched.stdout.split())
    bad = run("Qwen/Qwen3-8B", "--hf-overrides", "{bad")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
