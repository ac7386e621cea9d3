"""What users pass to an engine that changes the model it serves: config overrides and long-context switches.

- `--hf-overrides` (vLLM) and `--json-model-override-args` (SGLang) take a JSON object merged into the model's
  config.json before anything reads it. vLLM 0.33 config/model.py ModelConfig.__post_init__ splits it: flat
  values go to `config.update` (transformers_utils/config.py get_config), dict values update a nested sub-config
  key by key (`_apply_dict_overrides` / `_update_nested`) or, for a dict-valued field such as `rope_scaling`,
  replace it whole. SGLang 0.5 configs/model_config.py ModelConfig.__init__ does `json.loads` then
  `config.update` (nested sub-configs likewise replaced by their keys). kvsize applies the vLLM rule, which for
  the keys that matter here (rope_scaling, max_position_embeddings, text_config's fields) agrees with SGLang's.
- The environment switches that let an engine serve past the model's maximum context (each engine's own test of
  its variable: `LONG_CONTEXT_SWITCHES`).

Pure: the environment comes in as a mapping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kvsize.errors import UsageError

OVERRIDE_FLAGS = ("--hf-overrides", "--json-model-override-args")
_MAX_OVERRIDE_CHARS = 65_536


def parse_overrides(text: str | Mapping[str, Any] | None, flag: str = "--hf-overrides") -> dict[str, Any] | None:
    """The JSON object of `flag` (a mapping passes through); refused unless it is one JSON object."""
    if text is None:
        return None
    if isinstance(text, Mapping):
        value: Any = dict(text)
    else:
        if len(text) > _MAX_OVERRIDE_CHARS:
            raise UsageError(f"{flag}: longer than {_MAX_OVERRIDE_CHARS:,} characters")
        try:
            value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        except (json.JSONDecodeError, ValueError) as e:
            raise UsageError(
                f"{flag} is not JSON: {str(e)[:80]}",
                hint=f"""For example {flag} '{{"rope_scaling": {{"rope_type": "yarn", "factor": 4.0, """
                """"original_max_position_embeddings": 32768}}'""",
            ) from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object of config keys, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str) or not key or len(key) > 200:
            raise UsageError(f"{flag}: every key must be a config field name")
    for key in ("rope_scaling", "rope_parameters"):  # transformers takes an object (or null) there
        if key in value and value[key] is not None and not isinstance(value[key], dict):
            raise UsageError(f"{flag}: {key} must be a JSON object or null, got {type(value[key]).__name__}")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is out of range for a number")
    return value


def _is_sub_config(key: str, value: Any) -> bool:
    """A nested PreTrainedConfig in config.json: a `*_config` object (text_config, vision_config, ...)."""
    return isinstance(value, dict) and (key.endswith("_config") or "model_type" in value)


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """config.json with `overrides` applied as vLLM applies --hf-overrides: a dict value updates a nested
    sub-config key by key; any other value (rope_scaling's dict included) replaces the field."""
    out = dict(raw)
    for key, value in overrides.items():
        current = out.get(key)
        if isinstance(value, dict) and isinstance(current, dict) and _is_sub_config(key, current):
            out[key] = apply_overrides(current, value)
        else:
            out[key] = value
    return out


# engine -> (variable, how the engine reads it, where). Each accepts only what its own parser accepts.
LONG_CONTEXT_SWITCHES: dict[str, tuple[str, frozenset[str], bool, str]] = {
    # vllm/envs.py: os.environ.get(..., "0").strip().lower() in ("1", "true")
    "vllm": ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", frozenset({"1", "true"}), True, "vllm/envs.py"),
    # sglang/srt/utils get_bool_env_var: os.getenv(name, "false").lower() in ("true", "1")
    "sglang": (
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
        frozenset({"1", "true"}),
        False,
        "sglang/srt/utils.py get_bool_env_var (0.5.1)",
    ),
    # tensorrt_llm/_torch/pyexecutor/model_engine.py _init_max_seq_len: .lower() in ["1", "true", "yes", "y"]
    "trtllm": (
        "TLLM_ALLOW_LONG_MAX_MODEL_LEN",
        frozenset({"1", "true", "yes", "y"}),
        False,
        "tensorrt_llm/_torch/pyexecutor/model_engine.py PyTorchModelEngine._init_max_seq_len",
    ),
}


def long_context_switch(engine: str, environ: Mapping[str, str]) -> str | None:
    """`VAR=value` when `engine`'s long-context switch is set in `environ` as the engine reads it, else None."""
    entry = LONG_CONTEXT_SWITCHES.get(engine)
    if entry is None:
        return None
    name, accepted, strips, _ = entry
    value = environ.get(name)
    if value is None:
        return None
    seen = (value.strip() if strips else value).lower()
    return f"{name}={value}" if seen in accepted else None
