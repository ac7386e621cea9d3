"""Never silent (issue 19): a config whose cache-relevant fields kvsize does not understand is refused naming them,
or sized with --assume-standard-attention and a note naming the fields ignored; never sized silently.

The corpus is every config in the repository: the registry (kvsize/models/registry.jsonl), the configs it refused
(tests/data/registry_refused.jsonl), tests/data/configs and tests/data/never_silent (sources in its SOURCES.tsv).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tiny_configs import registry_config
from typer.testing import CliRunner

import kvsize
import kvsize.config as config_module
from kvsize.cache_fields import IRRELEVANT, READ, UnmodelledFields, cache_sounding, irrelevant_reason
from kvsize.cli import app
from kvsize.config import parse_config
from kvsize.errors import KvsizeError
from kvsize.registry import load_registry_config, registry_entries

DATA = Path(__file__).parent / "data"
NEVER_SILENT = DATA / "never_silent"


def _corpus() -> dict[str, dict[str, Any]]:
    configs = {e.hub_id: load_registry_config(e) for e in registry_entries().values()}
    for line in (DATA / "registry_refused.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        configs[f"refused:{entry['hub_id']}"] = entry["config"]
    for folder in (DATA / "configs", NEVER_SILENT):
        for path in sorted(folder.glob("*.json")):
            configs[f"{folder.name}/{path.name}"] = json.loads(path.read_text(encoding="utf-8"))
    return configs


CORPUS = _corpus()


def _text(config: dict[str, Any]) -> dict[str, Any]:
    for key in ("text_config", "language_config", "llm_config", "decoder", "generator"):
        if isinstance(config.get(key), dict):
            return config[key]  # type: ignore[no-any-return]
    return config


def _parse_reading(config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, set[str]]:
    """Parse, and collect every key the parser read (kvsize.config._Fields.used)."""
    made: list[Any] = []
    original = config_module._Fields.__init__

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(config_module._Fields, "__init__", spy)
    spec = parse_config(config, source="corpus")
    return spec, {key for fields in made if not fields.where.count(".") > 1 for key in fields.used}


# --- the corpus --------------------------------------------------------------------------------------------------

# Refused for fields the guard names, each worked from the config and the family's design:
EXPECTED_REFUSALS = {
    # (Kimi Linear, CogVLM2 and LFM2, refused here before, are sized: tests/test_families_2026.py; MiMo-V2-Flash,
    # Gemma 4 and Gemma 3n too: tests/test_families_round4.py; DeepSeek-V4: tests/test_deepseek_v4.py)
    # (MiniMax-M3's sparse layers and their indexer keys are sized: tests/test_families_round5.py)
    # (GLM-5.2's shared indexers are sized: tests/test_families_round5.py)
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_config_is_understood_or_refused_naming_its_fields(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = CORPUS[name]
    try:
        spec, read = _parse_reading(config, monkeypatch)
    except UnmodelledFields as exc:
        assert exc.fields, name
        assert all(field in str(exc) for field in exc.fields[:8]), name
        assert "--assume-standard-attention" in (exc.hint or "")
        assert name in EXPECTED_REFUSALS, f"{name} refused for {exc.fields}"
        assert EXPECTED_REFUSALS[name] <= set(exc.fields), exc.fields
        return
    except KvsizeError as exc:  # refused for another reason (a missing field): named in the message
        assert "'" in str(exc), name
        assert name not in EXPECTED_REFUSALS
        return
    assert name not in EXPECTED_REFUSALS, f"{name} sized silently"
    assert not any("assume-standard-attention" in n for n in spec.notes)
    # Every cache-sounding key the parser read is one the tables say it reads: they cannot drift from the parser
    # (it also reads widths for the weights and the context: vocab_size, intermediate_size, ...).
    text = _text(config)
    assert {k for k in read if k in text and cache_sounding(k)} <= set(READ), name


def test_the_refusals_are_the_ones_expected() -> None:
    refused = set()
    for name, config in CORPUS.items():
        try:
            parse_config(config, source=name)
        except UnmodelledFields:
            refused.add(name)
        except KvsizeError:
            pass
    assert refused == set(EXPECTED_REFUSALS)


# DeepSeek-V4's fields under a model type kvsize does not know (a successor's): compress_ratios is read only for
# deepseek_v4 and the index_* fields only beside MLA or on deepseek_v4, so the guard refuses them.
V4_FIELDS_ON_AN_UNKNOWN_TYPE = {
    **json.loads((NEVER_SILENT / "nvidia--DeepSeek-V4-Flash-NVFP4.json").read_text()),
    "model_type": "deepseek_v4_next",
}


def _written(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_refusal_is_exit_2_naming_fields_and_the_way_on(tmp_path: Path) -> None:
    path = _written(tmp_path, V4_FIELDS_ON_AN_UNKNOWN_TYPE)
    result = CliRunner().invoke(app, [str(path), "--ctx", "4096"])
    assert result.exit_code == 2
    assert "compress_ratios" in result.output and "--assume-standard-attention" in result.output


def test_assume_standard_attention_names_the_ignored_fields_on_every_answer(tmp_path: Path) -> None:
    # (MiMo-V2-Flash and DeepSeek-V4 served here before; they are sized exactly now: tests/test_families_round4.py,
    # tests/test_deepseek_v4.py)
    path = _written(tmp_path, V4_FIELDS_ON_AN_UNKNOWN_TYPE)
    result = CliRunner().invoke(
        app, [str(path), "--ctx", "4096", "--engine", "formula", "--assume-standard-attention", "--json"]
    )
    assert result.exit_code == 0, result.output
    notes = json.loads(result.output)["notes"]
    assert any("compress_ratios" in n and "assume-standard-attention" in n for n in notes)
    # With compress_ratios and the indexer ignored, every layer slides (Mistral's rule: sliding_window 128 and no
    # use_sliding_window) with num_key_value_heads 1 x (head_dim 512 K + 512 V): 43 layers x 1 x 1,024 x 2 bytes =
    # 88,064 B per token, not DeepSeek-V4's compressed cache.
    api = kvsize.estimate(V4_FIELDS_ON_AN_UNKNOWN_TYPE, ctx=4096, engine="formula", assume_standard_attention=True)
    assert api.scenarios[0].kv_bytes_per_token == 43 * 1 * 1024 * 2
    assert any("compress_ratios" in n for n in api.notes)


def test_library_refuses_by_default() -> None:
    with pytest.raises(UnmodelledFields) as caught:
        kvsize.estimate(V4_FIELDS_ON_AN_UNKNOWN_TYPE, ctx=4096, engine="formula")
    assert "compress_ratios" in caught.value.fields


def test_unknown_model_type_with_standard_fields_is_sized_with_its_note() -> None:
    config = {"model_type": "brand_new", "num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512}
    spec = parse_config(config)
    assert spec.notes[0].startswith("unknown model_type 'brand_new'")
    assert spec.layers[0].attention is not None and spec.layers[0].attention.elements_per_token == 2 * 8 * 64


# --- the fields the previous probe named -----------------------------------------------------------------------

LLAMA: dict[str, Any] = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}


@pytest.mark.parametrize(
    "fields",
    [
        {"model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False, "max_window_layers": 2},
        {"model_type": "gemma2", "sliding_window": 4096, "sliding_window_size": 4096},
        {"model_type": "falcon", "multi_query": True, "num_kv_heads": 71},
        {"model_type": "qwen2_5_vl", "vision_config": {"window_size": 112, "fullatt_block_indexes": [7]}},
        {"model_type": "zamba2", "lora_rank": 128, "use_shared_attention_lora": False},
        {"moe_latent_size": 1024, "use_cache": True, "norm_topk_prob": True, "topk_group": 1, "q_lora_rank": 1536},
        {"decoder_sparse_step": 1, "num_key_value_heads": 8},
    ],
)
def test_fields_that_sound_cache_related_but_are_understood(fields: dict[str, Any]) -> None:
    config = {**LLAMA, **fields}
    if config["model_type"] == "zamba2":  # zamba2 needs its state fields to parse at all; the guard is what's tested
        from kvsize.cache_fields import unknown_cache_fields

        assert unknown_cache_fields(config, config, "", "zamba2", config_module.KNOWN_MODEL_TYPES) == []
        return
    parse_config(config)


def test_gemma2_sliding_window_size_that_disagrees_is_refused() -> None:
    with pytest.raises(UnmodelledFields, match="sliding_window_size"):
        parse_config({**LLAMA, "model_type": "gemma2", "sliding_window": 4096, "sliding_window_size": 2048})


def test_every_irrelevant_key_sounds_cache_related_and_has_a_reason() -> None:
    for key, reason in IRRELEVANT.items():
        assert reason and key not in READ, key
    assert irrelevant_reason("use_cache") and irrelevant_reason("image_token_index")
    assert cache_sounding("compress_ratio") and cache_sounding("linear_attn_config")
    assert not cache_sounding("vocab_size")


# --- mutations: a known cache field renamed, removed or added ----------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Standard configs: every registry config kvsize sizes with no note of ignored fields.
SEEDS = sorted(n for n in CORPUS if n not in EXPECTED_REFUSALS and not n.startswith("refused:"))
ADDED: list[dict[str, Any]] = [
    {"sliding_window_pattern": 4},  # without a sliding_window
    {"kv_lora_rank": 512, "qk_rope_head_dim": 64},  # MLA fields on a model type that has none
    {"linear_attn_config": {"kda_layers": [1], "num_heads": 32, "head_dim": 128}},
    {"index_topk": 2048, "index_head_dim": 128},
    {"compress_ratio": 4},
    {"compress_ratios": [4, 128]},
    {"swa_num_key_value_heads": 8},
    {"global_head_dim": 512},
    {"num_global_key_value_heads": 2},
    {"kv_sharing_layers": [3]},
    {"conv_L_cache": 3},
    {"short_conv_kernel_size": 4},
    {"no_rope_layers": [1, 0, 1]},
    {"attention_sink_window": 64},
    {"sparse_attention_config": {"sparse_topk_blocks": 8}},
    {"latent_kv_dim": 256},
]


def _layer_count(text: dict[str, Any]) -> int:
    for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers"):
        if isinstance(text.get(key), int):
            return int(text[key])
    return 4


@FUZZ
@given(seed=st.sampled_from(SEEDS), added=st.sampled_from(ADDED))
def test_an_added_cache_field_is_refused(seed: str, added: dict[str, Any]) -> None:
    config = copy.deepcopy(CORPUS[seed])
    text = _text(config)
    assume(not any(k in text for k in added))
    model_type = str(text.get("model_type") or config.get("model_type"))
    if "kv_lora_rank" in added:  # MLA on a model type kvsize knows to have none (unknown types are read by field)
        assume(model_type in config_module.KNOWN_MODEL_TYPES and "deepseek" not in model_type)
    if "index_topk" in added:  # beside an MLA latent it is DeepSeek-V3.2's indexer, which kvsize sizes
        assume("kv_lora_rank" not in text)
    if "no_rope_layers" in added:
        assume(not model_type.startswith("llama4") and "attention_chunk_size" not in text)
    if "sliding_window_pattern" in added:
        assume(text.get("sliding_window") is None and model_type not in ("gemma2", "gemma3_text", "cohere2"))
    text.update(added)
    with pytest.raises(UnmodelledFields):
        parse_config(config, source=seed)


@st.composite
def renames(draw: st.DrawFn) -> tuple[str, str, str]:
    seed = draw(st.sampled_from(SEEDS))
    text = _text(CORPUS[seed])
    keys = sorted(k for k in text if k in READ and cache_sounding(k) and text[k] not in (None, False, [], {}, ""))
    assume(keys)
    key = draw(st.sampled_from(keys))
    new = draw(st.sampled_from([f"{key}_v2", f"swa_{key}", f"global_{key}", f"{key}_per_layer"]))
    return seed, key, new


@FUZZ
@given(renames())
def test_a_renamed_cache_field_is_refused_or_fails(case: tuple[str, str, str]) -> None:
    seed, key, new = case
    assume(new not in READ and irrelevant_reason(new) is None)
    config = copy.deepcopy(CORPUS[seed])
    text = _text(config)
    text[new] = text.pop(key)
    with pytest.raises(KvsizeError) as caught:
        parse_config(config, source=seed)
    if isinstance(caught.value, UnmodelledFields):
        assert any(new in f for f in caught.value.fields)


# Fields that switch a layout on: removed, their companions are left unexplained (no_rope_layers without
# attention_chunk_size is among the added fields above).
REMOVED = {"kv_lora_rank": "qk_rope_head_dim", "attn_layer_period": "attn_layer_offset"}


@pytest.mark.parametrize("removed", sorted(REMOVED))
def test_a_removed_layout_switch_is_refused(removed: str) -> None:
    # DeepSeek-V4's qk_rope_head_dim is its one head's RoPE part, read without kv_lora_rank (a key its saved configs
    # carry and DeepseekV4Config ignores), so no DeepSeek-V4 config is a seed here
    seeds = [
        n
        for n in SEEDS
        if removed in _text(CORPUS[n])
        and REMOVED[removed] in _text(CORPUS[n])
        and _text(CORPUS[n]).get("model_type") != "deepseek_v4"
    ]
    assert seeds, removed
    for name in seeds:
        config = copy.deepcopy(CORPUS[name])
        _text(config).pop(removed)
        with pytest.raises(UnmodelledFields) as caught:
            parse_config(config, source=name)
        # named among the fields (the message lists the first eight: DSA configs leave more unexplained)
        assert any(REMOVED[removed] in field for field in caught.value.fields), (name, caught.value.fields)


@FUZZ
@given(seed=st.sampled_from(SEEDS), kind=st.sampled_from(["conv", "kda_attention", "compressed_sparse_attention"]))
def test_layer_types_with_a_value_kvsize_does_not_know_are_refused(seed: str, kind: str) -> None:
    config = copy.deepcopy(CORPUS[seed])
    text = _text(config)
    assume(not text.get("is_encoder_decoder") and not config.get("is_encoder_decoder"))
    assume(not (kind == "conv" and str(text.get("model_type")).startswith("lfm2")))  # LFM2's own layer type
    n = _layer_count(text)
    text["layer_types"] = [kind] + ["full_attention"] * (n - 1)
    text.pop("layers_block_type", None)
    with pytest.raises(UnmodelledFields, match="layer_types"):
        parse_config(config, source=seed)


def test_no_field_is_read_by_two_families() -> None:
    """READ is built by dict unpacking, where a second `_family` naming a field silently replaces the first's
    reading (Step-3.5's per_layer_config once hid Gemma 4's): every field is named by one `_family` call only."""
    import ast

    import kvsize.cache_fields as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    named: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_family":
            named += [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    assert len(named) > 100
    assert sorted(k for k in set(named) if named.count(k) > 1) == []


def _zamba2_as_transformers_5_saves_it() -> dict[str, Any]:
    """Zyphra/Zamba2-7B's hub config, re-saved by transformers 5.25: Zamba2Config.__post_init__ writes
    attention_hidden_size = 2 x hidden_size and hybrid_layer_ids (the "hybrid" entries of layers_block_type),
    to_dict adds adapter_rank's default 128, and configuration_utils.py remaps "mamba" to "linear_attention"."""
    raw = registry_config("Zyphra/Zamba2-7B")
    types = raw["layers_block_type"]
    raw["attention_hidden_size"] = 2 * raw["hidden_size"]
    raw["hybrid_layer_ids"] = [i for i, t in enumerate(types) if t == "hybrid"]
    raw["adapter_rank"] = 128
    raw["layers_block_type"] = ["linear_attention" if t == "mamba" else t for t in types]
    return raw


def test_zamba2_saved_by_transformers_5_sizes_as_the_hub_config() -> None:
    hub = parse_config(registry_config("Zyphra/Zamba2-7B"))
    saved = parse_config(_zamba2_as_transformers_5_saves_it())
    # 13 hybrid layers of 32 KV heads x 224 (2 x 3,584 / 32) attend over [hidden, embeddings]
    assert saved.layers == hub.layers
    attention = [layer.attention for layer in saved.layers if layer.attention is not None]
    assert len(attention) == 13 and {(a.num_kv_heads, a.head_dim, a.head_dim_v) for a in attention} == {(32, 224, 224)}
    assert sum(layer.state is not None for layer in saved.layers) == 81  # a Mamba-2 state in every layer


@pytest.mark.parametrize(
    ("key", "value"), [("attention_hidden_size", 3584), ("hybrid_layer_ids", [0, 1]), ("adapter_rank", None)]
)
def test_zamba2_derived_fields_that_disagree_are_refused(key: str, value: Any) -> None:
    raw = _zamba2_as_transformers_5_saves_it()
    if value is None:  # adapter_rank alone is weights: any value is fine, while the derived two agree
        raw[key] = 8
        parse_config(raw)
        return
    raw[key] = value
    with pytest.raises(UnmodelledFields, match=key):
        parse_config(raw)


# LongCat-Flash (meituan-longcat/LongCat-Flash-Chat's layout at transformers 5.25 LongcatFlashConfig's defaults):
LONGCAT = {
    "model_type": "longcat_flash",
    "architectures": ["LongcatFlashForCausalLM"],
    "num_layers": 28,
    "hidden_size": 6144,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 131072,
}


def test_longcat_flash_caches_two_mla_sublayers_per_layer() -> None:
    # transformers 5.25 modeling_longcat_flash.py LongcatFlashDecoderLayer: self_attn = ModuleList of two
    # LongcatFlashMLA (layer_idx * 2 + i); LongcatFlashConfig.num_hidden_layers = 2 x num_layers; vLLM 0.34
    # models/longcat_flash.py builds self_attn.0 and .1. So 56 MLA caches of 512 + 64 = 576 elements:
    # 56 x 576 x 2 B = 64,512 B per token (sized from num_layers alone it was 28: half).
    spec = parse_config(LONGCAT)
    mla = [layer.attention for layer in spec.layers if layer.attention is not None]
    assert len(mla) == 56 and {a.head_dim for a in mla} == {576}
    stated = dict(LONGCAT, num_hidden_layers=56)
    assert len(parse_config(stated).layers) == 56
    with pytest.raises(KvsizeError, match="must be 2 x num_layers"):
        parse_config(dict(LONGCAT, num_hidden_layers=28))


def test_llama4_attn_temperature_tuning_scales_queries_only() -> None:
    # transformers 5.25 Llama4TextAttention: `if self.attn_temperature_tuning and not self.use_rope:
    # query_states = query_states * attn_scales`; the cache is the same with it on (Llama4TextConfig's default True)
    raw = registry_config("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    plain = parse_config(raw)
    raw["text_config"]["attn_temperature_tuning"] = True
    assert parse_config(raw).layers == plain.layers


def test_longcat_layer_count_bound() -> None:
    # num_layers is read up to MAX_LAYERS // 2, so the 2 x num_layers caches stay within MAX_LAYERS (100,000)
    assert len(parse_config(dict(LONGCAT, num_layers=50_000)).layers) == 100_000
    for blocks in (50_001, 100_000):
        with pytest.raises(KvsizeError, match="num_layers"):
            parse_config(dict(LONGCAT, num_layers=blocks))
