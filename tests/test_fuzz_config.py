"""Fuzz of `parse_config` (and the formula engine behind it) over mutated real configs.

Every registry config (kvsize/models via `kvsize.registry`) is the seed of a family of hostile variants: keys
the parser reads are deleted, or set to values of the wrong type or an absurd size (str, float, negative, 0,
booleans, None, lists, dicts, 10**30, NaN / inf, deeply nested structures, very long lists), at the top level
and inside text_config, vision_config, quantization_config, attn_config and block_configs[i].attention. The
contract checked on every variant:

- `parse_config` returns an `ArchSpec` whose numbers are all non-negative ints, or raises a `KvsizeError`
  whose message is one line and names the source; no other exception escapes;
- the formula engine, on every spec that parses, returns int bytes (non-negative, batch x per request,
  linear in the batch, non-decreasing in the context) or raises a `KvsizeError`.

Budget (measured on 2 cores, Python 3.11, load average 2.4): MAX_EXAMPLES = 1000 examples for each of the 4
hypothesis tests (4000 in all), 19-20 s wall for the whole file (about 8 + 5 + 4 + 3 s for the four). The
environment variable KVSIZE_FUZZ_EXAMPLES overrides the count for a longer run; 6000 and 8000 per test
(2-3 minutes) found nothing beyond the bugs pinned at the end of this file.

Registry configs are the seeds, plus tests/data/configs/*.json (T5, Whisper) for the encoder-decoder path.

Strings drawn here hold no line breaks: a config string with a line break that reaches an error message is a
known bug, pinned by `test_error_message_with_line_break_is_one_line` below. The layer count MAX_LAYERS (100000)
itself is never drawn (accepted, but a second to build); 100001 and far beyond are.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kvsize.config import MAX_DIM, MAX_LAYERS, MAX_POSITIONS, parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.errors import ConfigError, KvsizeError
from kvsize.registry import load_registry_config, registry_entries
from kvsize.spec import ArchSpec

MAX_EXAMPLES = int(os.environ.get("KVSIZE_FUZZ_EXAMPLES", "1000"))
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)

SEEDS: dict[str, dict[str, Any]] = {
    entry.hub_id: load_registry_config(entry) for entry in registry_entries().values()
}
# The test-data configs of families the registry lacks (T5, Whisper: the encoder-decoder path) seed it too.
for _path in sorted((Path(__file__).parent / "data" / "configs").glob("*.json")):
    SEEDS[f"tests/data/{_path.name}"] = json.loads(_path.read_text(encoding="utf-8"))
SEED_IDS = sorted(SEEDS)

# Keys kvsize.config reads (top level or inside the language model's config).
PARSER_KEYS = (
    "model_type", "is_encoder_decoder", "auto_map", "torch_dtype", "dtype",
    "decoder_layers", "num_decoder_layers", "decoder_attention_heads", "d_kv", "max_source_positions",
    "num_hidden_layers", "n_layer", "num_layers", "n_layers",
    "num_attention_heads", "n_head", "n_heads",
    "hidden_size", "n_embd", "d_model",
    "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "max_seq_len",
    "model_max_length",
    "text_config", "language_config", "llm_config", "decoder", "generator", "vision_config",
    "quantization_config", "attn_config",
    "num_key_value_heads", "n_head_kv", "num_kv_heads", "num_attention_groups",
    "multi_query", "new_decoder_architecture", "multi_query_attention", "multi_query_group_num",
    "head_dim", "kv_channels", "attention_head_dim", "hidden_size_per_head", "v_head_dim",
    "kv_lora_rank", "qk_rope_head_dim",
    "sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
    "layer_types", "layers_block_type", "hybrid_override_pattern", "block_configs",
    "attn_layer_period", "attn_layer_offset", "full_attention_interval",
    "attention_chunk_size", "no_rope_layers", "no_rope_layer_interval",
    "cross_attention_layers", "num_kv_shared_layers",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "ssm_state_size", "state_size", "mamba_d_state", "d_state",
    "conv_kernel", "mamba_d_conv", "d_conv", "conv_dimension",
    "mamba_d_ssm", "expand", "mamba_expand", "expansion_factor", "intermediate_size",
    "mamba_head_dim", "mamba_headdim", "mamba_d_head", "head_dim",
    "n_groups", "mamba_n_groups", "mamba_ngroups", "ngroups",
    "mamba_num_heads", "mamba_n_heads", "n_mamba_heads", "num_heads",
)
# Keys of the nested objects the parser looks into.
NESTED_KEYS = (
    "max_num_tiles", "image_size", "patch_size",  # vision_config
    "kv_cache_scheme", "kv_cache_quant_algo", "quant_method",  # quantization_config
    "kv_n_heads",  # attn_config
    "no_op", "replace_with_linear", "n_heads_in_group",  # block_configs[i].attention
)
ALL_KEYS = tuple(dict.fromkeys(PARSER_KEYS + NESTED_KEYS))

LAYER_TYPE_NAMES = (
    "full_attention", "attention", "global", "sliding_attention", "local", "chunked_attention",
    "linear_attention", "mamba", "hybrid", "mlp", "moe", "cross_attention", "", "FULL_ATTENTION",
)
NAMED_STRINGS = (
    "", " ", "0", "32", "-1", "1e3", "nan", "Infinity", "null", "true",
    "bfloat16", "float16", "float32", "torch.bfloat16", "fp8", "float8_e4m3fn", "nvfp4", "int4", "q4_0",
    "llama", "mistral", "gemma2", "gemma3_text", "qwen2", "qwen3_next", "zamba2", "mamba", "mamba2",
    "deepseek_v3", "mllama", "llama4_text", "nemotron-nas", "exaone4", "gpt2", "t5", "__proto__",
    "LLLG", "L", "G", "LGX", "*", "M", "-", "E", "*M-E", "M*M*", "[/]", "[bold]", "%s", "{}", "\x00", "é",
    "\u202e", "a" * 2000,
)
NUMBERS = (
    0, -1, 1, 2, 3, 4, 7, 8, 64, 128, 4096, 65536, MAX_DIM, MAX_DIM + 1, MAX_LAYERS + 1, MAX_POSITIONS,
    MAX_POSITIONS + 1, 2**31, 2**32, 2**63, -(2**63), 2**64, 10**30, -(10**30), 10**400,
    0.0, -0.0, 0.5, 1.5, 32.0, 4096.0, 1e300, -1e300, 5e-324, math.nan, math.inf, -math.inf,
)
# No line breaks: see the module docstring and the pinned bug at the end of this file.
line_free_text = st.text(st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), max_size=16)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=300),
    st.sampled_from(NUMBERS),
    st.floats(allow_nan=True, allow_infinity=True),
    line_free_text,
    st.sampled_from(NAMED_STRINGS),
    st.sampled_from(LAYER_TYPE_NAMES),
)
structures = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6)
    | st.dictionaries(st.sampled_from(ALL_KEYS) | line_free_text, inner, max_size=6),
    max_leaves=16,
)


def nest(depth: int, kind: str) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"attention": value, "kv_n_heads": 1}  # a tree, as JSON gives
    return value


deep = st.builds(nest, st.integers(min_value=2, max_value=300), st.sampled_from(["list", "dict"]))
LONG_LISTS = (
    ["full_attention"] * 100_001,
    ["sliding_attention"] * 300_000,
    [1] * 200_000,
    [0] * 100_001,
    list(range(100_001)),
    [None] * 50_000,
    [{"attention": {"n_heads_in_group": 8}}] * 100_001,
)
long_lists = st.sampled_from(LONG_LISTS)


def layer_count(config: dict[str, Any]) -> int:
    """The seed's layer count (for lists one layer too short, exact or too long)."""
    for container in (config.get("text_config"), config):
        if isinstance(container, dict):
            for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
                value = container.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 4096:
                    return value
    return 32


def layer_shaped(n: int) -> st.SearchStrategy[Any]:
    """Plausible per-layer values: lists of n - 1, n or n + 1 layer types / ints / blocks, or pattern strings."""
    sizes = st.sampled_from([max(n - 1, 0), n, n + 1])
    return st.one_of(
        sizes.flatmap(lambda k: st.lists(st.sampled_from(LAYER_TYPE_NAMES[:11]), min_size=k, max_size=k)),
        sizes.flatmap(lambda k: st.lists(st.integers(-2, n + 1), min_size=k, max_size=k)),
        sizes.flatmap(lambda k: st.text(st.sampled_from("*M-EX"), min_size=k, max_size=k)),
        sizes.flatmap(
            lambda k: st.lists(
                st.fixed_dictionaries(
                    {"attention": st.one_of(
                        st.fixed_dictionaries({"n_heads_in_group": st.sampled_from([1, 2, 3, 8, 0, None, 1.5])}),
                        st.fixed_dictionaries({"no_op": st.booleans()}),
                        st.fixed_dictionaries({"replace_with_linear": st.booleans()}),
                        scalars,
                    )}
                ),
                min_size=k,
                max_size=k,
            )
        ),
        st.lists(st.integers(min_value=0, max_value=n - 1), max_size=8),  # cross_attention_layers-like
    )


small_ints = st.integers(min_value=0, max_value=16)


def hostile_values(n: int) -> st.SearchStrategy[Any]:
    return st.one_of(scalars, small_ints, structures, deep, long_lists, layer_shaped(n))


def containers(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The dicts the parser reads: the top level and the nested configs it looks into."""
    yield config
    for key in ("text_config", "language_config", "llm_config", "vision_config", "quantization_config",
                "attn_config"):
        nested = config.get(key)
        if isinstance(nested, dict):
            yield nested
            if key == "text_config":
                yield from (v for k, v in nested.items()
                            if k in ("attn_config", "vision_config") and isinstance(v, dict))
    for holder in (config, config.get("text_config")):
        blocks = holder.get("block_configs") if isinstance(holder, dict) else None
        if isinstance(blocks, list):
            yield from (b["attention"] for b in blocks[:3]
                        if isinstance(b, dict) and isinstance(b.get("attention"), dict))


@st.composite
def mutated_configs(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    hub_id = draw(st.sampled_from(SEED_IDS))
    config = copy.deepcopy(SEEDS[hub_id])
    n = layer_count(config)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        target = draw(st.sampled_from(list(containers(config))))
        present = [k for k in ALL_KEYS if k in target]
        others = list(dict.fromkeys([*ALL_KEYS, *target]))
        prefer_present = bool(present) and draw(st.booleans())
        key = draw(st.sampled_from(present if prefer_present else others))
        if draw(st.integers(0, 3)) == 0:  # delete (or leave absent)
            target.pop(key, None)
        else:
            target[key] = draw(hostile_values(n))
    return hub_id, config


def numeric_leaves(value: Any) -> Iterator[Any]:
    """Every number in a record's builtins tree. Bools are left out here: `check_spec` checks every field's type
    (a bool in an int field included) by converting the tree back strictly."""
    if isinstance(value, dict):
        for item in value.values():
            yield from numeric_leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from numeric_leaves(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def check_spec(spec: ArchSpec) -> None:
    assert isinstance(spec, ArchSpec)
    assert spec.num_layers >= 1
    # Every field holds its declared type (no bool or float in an int field, no list for a tuple): the spec
    # converts back from its builtins under msgspec's strict rules, checks included, to an equal spec.
    assert msgspec.convert(msgspec.to_builtins(spec), ArchSpec, strict=True) == spec
    for number in numeric_leaves(msgspec.to_builtins(spec)):
        assert type(number) is int, number  # no float
        assert number >= 0, number
    assert all(isinstance(note, str) for note in spec.notes)
    for layer in spec.layers:  # a recurrent state of zero size is a silently wrong number
        if layer.state is not None:
            assert min(layer.state.ssm_shape, default=1) >= 1, layer.state
            assert layer.state.conv_channels >= 1, layer.state


def check_error(exc: KvsizeError, source: str) -> None:
    message = str(exc)
    assert len(message.splitlines()) == 1, message
    assert source in message, message


def parse_or_error(raw: Any, source: str) -> ArchSpec | None:
    """The spec, or None after checking the error; any other exception escapes and fails the test."""
    try:
        spec = parse_config(raw, source=source)
    except KvsizeError as exc:
        check_error(exc, source)
        return None
    check_spec(spec)
    return spec


def check_engine(spec: ArchSpec, ctx: int, batch: int, kv_dtype: KvDtype) -> None:
    engine = get_engine("formula")
    try:
        one = engine.estimate(spec, ctx=ctx, batch=1, kv_dtype=kv_dtype)
        many = engine.estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype)
        longer = engine.estimate(spec, ctx=ctx + 1, batch=1, kv_dtype=kv_dtype)
    except KvsizeError:
        return
    for est in (one, many, longer):
        for value in (est.kv_cache_bytes, est.bytes_per_request, est.kv_bytes_per_token,
                      est.state_bytes_per_request):
            assert type(value) is int and value >= 0, (value, est)
        assert est.kv_cache_bytes == est.batch * est.bytes_per_request
    assert many.kv_cache_bytes == batch * one.kv_cache_bytes
    assert longer.kv_cache_bytes >= one.kv_cache_bytes


contexts = st.one_of(st.integers(min_value=1, max_value=1 << 20), st.sampled_from([1, 4096, 131072, 1 << 40]))
batches = st.one_of(st.integers(min_value=1, max_value=64), st.just(1 << 20))


def test_every_seed_parses() -> None:
    """The unmutated seeds parse: otherwise the fuzz would only test the error path."""
    assert len(registry_entries()) >= 60
    for raw in SEEDS.values():
        check_spec(parse_config(copy.deepcopy(raw)))


@FUZZ
@given(mutated_configs(), contexts, batches, st.sampled_from(list(KvDtype)))
def test_mutated_registry_configs(
    case: tuple[str, dict[str, Any]], ctx: int, batch: int, kv_dtype: KvDtype
) -> None:
    hub_id, raw = case
    spec = parse_or_error(raw, f"fuzz:{hub_id}")
    event("parsed" if spec is not None else "error")
    if spec is not None:
        check_engine(spec, ctx, batch, kv_dtype)


@FUZZ
@given(
    st.one_of(structures, deep, st.sampled_from(NUMBERS), line_free_text),
    st.sampled_from(ALL_KEYS),
    st.sampled_from(SEED_IDS),
)
def test_single_field_replaced_everywhere(value: Any, key: str, hub_id: str) -> None:
    """One field set to one hostile value both at the top level and in every nested config."""
    raw = copy.deepcopy(SEEDS[hub_id])
    for target in list(containers(raw)):
        target[key] = copy.deepcopy(value)
    spec = parse_or_error(raw, f"fuzz:{hub_id}")
    if spec is not None:
        check_engine(spec, 8192, 2, KvDtype.BF16)


@st.composite
def renumbered_configs(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """Valid-looking configs: one to three numeric fields of a seed set to other small whole numbers, which
    reaches the combinations the type checks let through (dims that do not divide, tiny hidden sizes)."""
    hub_id = draw(st.sampled_from(SEED_IDS))
    config = copy.deepcopy(SEEDS[hub_id])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        target = draw(st.sampled_from(list(containers(config))))
        numeric = [k for k in ALL_KEYS if isinstance(target.get(k), int) and not isinstance(target.get(k), bool)]
        key = draw(st.sampled_from(numeric or list(ALL_KEYS)))
        target[key] = draw(st.one_of(st.integers(min_value=0, max_value=9), st.sampled_from([16, 31, 64, 100, 127])))
    return hub_id, config


@FUZZ
@given(renumbered_configs(), contexts, batches, st.sampled_from(list(KvDtype)))
def test_renumbered_registry_configs(
    case: tuple[str, dict[str, Any]], ctx: int, batch: int, kv_dtype: KvDtype
) -> None:
    hub_id, raw = case
    spec = parse_or_error(raw, f"fuzz:{hub_id}")
    if spec is not None:
        check_engine(spec, ctx, batch, kv_dtype)


@FUZZ
@given(st.one_of(scalars, structures, deep))
def test_non_object_configs(raw: Any) -> None:
    """Whatever JSON value a config.json holds, the parser answers with a spec or a one-line error."""
    parse_or_error(raw, "fuzz:whole")


# --- bugs the fuzz found, now fixed: each stays as a regression test ---------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"layer_types": ["full\nattention"] * 4},
        {"layers_block_type": ["mamba\r\nattention"] * 4},
    ],
)
def test_error_message_with_line_break_is_one_line(fields: dict[str, Any]) -> None:
    raw = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512, **fields}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, source="fuzz:newline")
    check_error(info.value, "fuzz:newline")


def test_zamba2_tiny_hidden_size_is_a_config_error() -> None:
    raw = {**copy.deepcopy(SEEDS["Zyphra/Zamba2-7B"]), "hidden_size": 1}  # head_dim = 2 x 1 // 32 = 0
    with pytest.raises(ConfigError) as info:
        parse_config(raw, source="fuzz:zamba2")
    check_error(info.value, "fuzz:zamba2")


@pytest.mark.parametrize("case", ["codestral-head-dim", "zamba2-hidden"])
def test_mamba2_state_with_zero_heads_is_a_config_error(case: str) -> None:
    if case == "codestral-head-dim":
        # No num_heads: heads = d_inner // head_dim = (2 x 4096) // 16384 = 0.
        raw = {k: v for k, v in SEEDS["mistralai/Mamba-Codestral-7B-v0.1"].items() if k != "num_heads"}
        raw["head_dim"] = 16384
    else:
        # d_inner = mamba_expand 2 x hidden 16 = 32; heads = 32 // mamba_headdim 64 = 0.
        raw = {**copy.deepcopy(SEEDS["Zyphra/Zamba2-7B"]), "hidden_size": 16}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, source="fuzz:mamba2")
    check_error(info.value, "fuzz:mamba2")
