"""Parameter counts from config.json against published counts.

Most expected values are Hugging Face Hub `safetensors.total` figures (exact integers); where a publisher only
gives a rounded figure ("671B"), the check is the 1% band. Sources are public files found by full-text search;
each is named by what it is plus the search index's file id, since several were reported without a repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tiny_configs import registry_config

from kvsize.errors import ConfigError
from kvsize.params import ParamEstimate, estimate_parameters
from kvsize.registry import find_entry, load_registry_config, registry_entries

MODELS = Path(__file__).resolve().parent.parent / "kvsize" / "models"

# Sources (HF = Hugging Face Hub API `safetensors.total`):
S_AUDIT = "HF safetensors.total table KNOWN_MODELS in audit_compliance.py (index file id 71142266638)"
S_HELDOUT = "HF safetensors.total table HF_API in build_dataset.py (index file id 71571056092)"


def load(name: str) -> dict[str, Any]:
    """A registry config by its old file name ("org--name"); the registry is one JSON-lines file now."""
    entry = find_entry(name.replace("--", "/", 1))
    assert entry is not None, name
    return load_registry_config(entry)


def estimate(name: str) -> ParamEstimate:
    return estimate_parameters(load(name))


# (registry file, expected total, source). Exact equality.
EXACT: list[tuple[str, int, str]] = [
    ("meta-llama--Llama-3.1-8B", 8_030_261_248, S_HELDOUT),  # source: HF_API "meta-llama/Llama-3.1-8B"
    ("meta-llama--Llama-3.1-8B-Instruct", 8_030_261_248, S_AUDIT),  # source: KNOWN_MODELS
    # source: ollama /api/show general.parameter_count, llama3 8B (context 8192), index id 56679190522
    ("meta-llama--Meta-Llama-3-8B", 8_030_261_248, "ollama general.parameter_count"),
    (
        "meta-llama--Llama-3.1-70B-Instruct",
        70_553_706_496,
        S_HELDOUT,
    ),  # source: HF_API "meta-llama/Llama-3.1-70B"
    ("meta-llama--Llama-3.3-70B-Instruct", 70_553_706_496, S_AUDIT),
    (
        "meta-llama--Meta-Llama-3.1-405B",
        405_853_388_800,
        S_HELDOUT,
    ),  # source: HF_API "meta-llama/Llama-3.1-405B"
    ("meta-llama--Llama-3.2-1B-Instruct", 1_235_814_400, S_AUDIT),
    ("meta-llama--Llama-3.2-3B-Instruct", 3_212_749_824, S_AUDIT),
    ("meta-llama--Llama-3.2-3B", 3_212_749_824, S_AUDIT),  # same weights shape as -Instruct
    ("mistralai--Mistral-7B-Instruct-v0.3", 7_248_023_552, S_AUDIT),
    ("mistralai--Ministral-8B-Instruct-2410", 8_019_808_256, S_AUDIT),
    # source: keras-hub mixtral preset metadata "params" (index id 678925060); mocked HF safetensors.total of
    # Mixtral-8x7B-Instruct-v0.1 in a test (index id 59143658729)
    ("mistralai--Mixtral-8x7B-v0.1", 46_702_792_704, "keras-hub preset / HF safetensors.total"),
    # source: HF safetensors.total of mistral-community/Mixtral-8x22B-v0.1 in an audit table
    # (index id 69468411049)
    ("mistralai--Mixtral-8x22B-v0.1", 140_620_634_112, "HF safetensors.total (mistral-community mirror)"),
    ("Qwen--Qwen2.5-7B-Instruct", 7_615_616_512, S_AUDIT),
    # source: ollama general.parameter_count for qwen2 7B (index id 68407820603); same dims as Qwen2.5-7B
    ("Qwen--Qwen2.5-7B", 7_615_616_512, S_AUDIT),
    ("Qwen--Qwen2-7B", 7_615_616_512, "ollama general.parameter_count qwen2 (index id 68407820603)"),
    ("Qwen--Qwen2.5-3B-Instruct", 3_085_938_688, S_AUDIT),
    # source: llama.cpp /v1/models meta n_params of Qwen2.5-14B-Instruct GGUF (index id 56913516336)
    ("Qwen--Qwen2.5-14B", 14_770_033_664, "llama.cpp n_params"),
    # source: HF parameter table "qwen/qwen2.5-32b-instruct": 32763876352 (index id 12439498600)
    ("Qwen--Qwen2.5-32B", 32_763_876_352, "HF parameter table (index id 12439498600)"),
    ("Qwen--Qwen3-8B", 8_190_735_360, S_AUDIT),
    ("Qwen--Qwen3-32B", 32_762_123_264, S_AUDIT),
    # source: GGUF general.parameter_count of Qwen3-30B-A3B (index id 70255288268; llama-bench
    # model_n_params, index id 58538622392)
    ("Qwen--Qwen3-30B-A3B", 30_532_122_624, "GGUF general.parameter_count"),
    # source: mteb ModelMeta n_parameters (index id 59863403706); measured sum(p.numel()) (id 66958499806)
    ("Qwen--Qwen2.5-VL-7B-Instruct", 8_292_166_656, "mteb ModelMeta n_parameters"),
    # source: keras-hub gemma_2b_en preset "params" (index id 401604204)
    ("google--gemma-2b", 2_506_172_416, "keras-hub preset"),
    ("google--gemma-2-2b-it", 2_614_341_888, S_AUDIT),
    ("google--gemma-2-2b", 2_614_341_888, S_AUDIT),  # base and -it share the shapes
    ("google--gemma-3-1b-it", 999_885_952, S_AUDIT),
    ("google--gemma-3-4b-it", 4_300_079_472, S_AUDIT),  # includes the SigLIP vision tower
    ("HuggingFaceTB--SmolLM2-135M-Instruct", 134_515_008, S_AUDIT),
    ("HuggingFaceTB--SmolLM2-360M-Instruct", 361_821_120, S_AUDIT),
    ("microsoft--Phi-3-mini-4k-instruct", 3_821_079_552, S_AUDIT),
    ("microsoft--Phi-4-mini-instruct", 3_836_021_760, S_AUDIT),
    ("microsoft--phi-4", 14_659_507_200, S_AUDIT),
    # source: hf_metadata "safetensors_total_params": 1418270720 for microsoft/phi-1_5 (index id 70407034430)
    ("microsoft--phi-1_5", 1_418_270_720, "HF safetensors total"),
    # source: hiq print_model of GPT2LMHeadModel "<all params:124439808>" (index id 58641530465)
    ("openai-community--gpt2", 124_439_808, "transformers GPT2LMHeadModel parameter count"),
    # source: keras-hub gpt2_medium_en preset "params" (index id 401006770)
    ("openai-community--gpt2-medium", 354_823_168, "keras-hub preset"),
    # source: llama.cpp meta n_params of TinyLlama-1.1B-Chat (index id 55824169007)
    ("TinyLlama--TinyLlama-1.1B-Chat-v1.0", 1_100_048_384, "llama.cpp n_params"),
    # source: HF parameter table, RedPajama-INCITE-Chat-3B-v1: 2775864320 (index id 4120541175)
    ("togethercomputer--RedPajama-INCITE-Chat-3B-v1", 2_775_864_320, "HF parameter table"),
    ("openai--gpt-oss-120b", 116_829_156_672, S_AUDIT),
    ("openai--gpt-oss-20b", 20_914_757_184, S_AUDIT),
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct", 108_641_793_536, S_AUDIT),  # includes the vision encoder
    # source: Fireworks billing-export docs, parameter-count column for Llama 4 Maverick (id 16519339830)
    ("meta-llama--Llama-4-Maverick-17B-128E-Instruct", 401_583_781_376, "Fireworks docs"),
    # source: count_parameters(LlavaForConditionalGeneration(config)) == 7063427072 (index id 4065502446)
    ("llava-hf--llava-1.5-7b-hf", 7_063_427_072, "transformers LlavaForConditionalGeneration count"),
]


@pytest.mark.parametrize(("name", "expected", "source"), EXACT, ids=[e[0] for e in EXACT])
def test_exact_published_count(name: str, expected: int, source: str) -> None:
    assert estimate(name).total == expected, source


# Llama 2 hub checkpoints also store each layer's rotary `inv_freq` buffer (head_dim / 2 = 64 floats), which
# safetensors.total counts and which is not a parameter.
LLAMA2 = [
    ("meta-llama--Llama-2-7b-hf", 6_738_417_664, 32),  # source: S_HELDOUT, HF_API "meta-llama/Llama-2-7b-hf"
    ("meta-llama--Llama-2-13b-hf", 13_015_866_880, 40),  # source: S_HELDOUT, "meta-llama/Llama-2-13b-hf"
    ("meta-llama--Llama-2-70b-hf", 68_976_653_312, 80),  # source: S_HELDOUT, "meta-llama/Llama-2-70b-hf"
]


@pytest.mark.parametrize(("name", "safetensors_total", "layers"), LLAMA2, ids=[e[0] for e in LLAMA2])
def test_llama2_safetensors_total_minus_inv_freq(name: str, safetensors_total: int, layers: int) -> None:
    assert estimate(name).total == safetensors_total - layers * 64


# Qwen3 small models tie lm_head to the embedding, but the hub checkpoint stores lm_head.weight too, so
# safetensors.total = parameters + vocab x hidden.
QWEN3_TIED = [
    ("Qwen--Qwen3-0.6B", 751_632_384, 151_936 * 1024),  # source: S_AUDIT "Qwen/Qwen3-0.6B"
    ("Qwen--Qwen3-1.7B", 2_031_739_904, 151_936 * 2048),  # source: S_AUDIT "Qwen/Qwen3-1.7B"
]


@pytest.mark.parametrize(("name", "safetensors_total", "lm_head"), QWEN3_TIED, ids=[e[0] for e in QWEN3_TIED])
def test_qwen3_tied_checkpoint_stores_lm_head(name: str, safetensors_total: int, lm_head: int) -> None:
    result = estimate(name)
    assert "lm_head" not in result.breakdown
    assert result.total + lm_head == safetensors_total


# Publishers that only give rounded figures: within 1%.
ROUNDED: list[tuple[str, float, float | None]] = [
    # source: DeepSeek-V3 model card "671B total parameters with 37B activated for each token"; the hub's 685B
    # adds the 14B MTP module, which kvsize leaves out.
    ("deepseek-ai--DeepSeek-V3", 671e9, 37e9),
    ("deepseek-ai--DeepSeek-R1", 671e9, 37e9),  # source: DeepSeek-R1 model card, same architecture as V3
    # source: Nemotron-H-56B-Base-8K model card "This model has 56B model parameters."
    ("nvidia--Nemotron-H-56B-Base-8K", 56e9, None),
    # source: Mixtral paper / Mistral announcement: 46.7B total, 12.9B active per token
    ("mistralai--Mixtral-8x7B-v0.1", 46.7e9, 12.9e9),
    # source: Qwen3-30B-A3B model card: 30.5B total, 3.3B activated
    ("Qwen--Qwen3-30B-A3B", 30.5e9, 3.3e9),
    # source: AI21 Jamba 1.5 announcement / model card: Jamba 1.5 Mini "12B active parameters, 52B total"
    ("ai21labs--AI21-Jamba-1.5-Mini", 52e9, 12e9),
]


@pytest.mark.parametrize(("name", "total", "active"), ROUNDED, ids=[e[0] for e in ROUNDED])
def test_rounded_published_count(name: str, total: float, active: float | None) -> None:
    result = estimate(name)
    assert result.total == pytest.approx(total, rel=0.01)
    if active is not None:
        assert result.active == pytest.approx(active, rel=0.02)  # "3.3B" is itself rounded to 1.5%


def test_gpt_oss_active_excludes_input_embedding() -> None:
    # source: gpt-oss model card table "# Activated Parameters 5.13B | 3.61B" (index id 43217678796); OpenAI's
    # active figure leaves out the input embedding (a table lookup) but keeps the unembedding.
    for name, active in (("openai--gpt-oss-120b", 5.13e9), ("openai--gpt-oss-20b", 3.61e9)):
        result = estimate(name)
        assert result.active is not None
        assert result.active - result.breakdown["embeddings"] == pytest.approx(active, rel=0.01)


def test_mixtral_active_is_top2_of_8() -> None:
    result = estimate("mistralai--Mixtral-8x7B-v0.1")
    per_expert = 3 * 4096 * 14336
    assert result.active == result.total - 32 * 6 * per_expert  # 12,879,925,248


def test_deepseek_mtp_not_counted_but_noted() -> None:
    result = estimate("deepseek-ai--DeepSeek-V3")
    assert result.total == 671_026_419_200
    assert any("multi-token-prediction" in note for note in result.notes)


def test_dense_models_have_no_active_count() -> None:
    assert estimate("meta-llama--Llama-3.1-8B").active is None


# Registry models whose parameters kvsize.params cannot count yet (they need --weights-mem with --gpu). Empty
# since the encoder-decoders, Nemotron-3 MoE ('E' layers) and Qwen3.5-MoE are counted (below).
PARAMS_GAPS: set[str] = set()


# ------------------------------------------------------------------ encoder-decoders, Nemotron-3, Qwen3.5-MoE
# Oracle: transformers 5.24 itself. Each config built on the meta device (no memory, no weights):
#   with torch.device("meta"): model = AutoModelForSeq2SeqLM / WhisperForConditionalGeneration /
#       AutoModelForCausalLM / Qwen3_5MoeForConditionalGeneration (config)
#   sum(p.numel() for p in model.parameters())   # parameters() yields a tied tensor once
# (test_transformers_meta_device_oracle below recomputes these when transformers is installed.) Buffers are not
# parameters: BART final_logits_bias, Nemotron-H router e_score_correction_bias. MTP weights (Qwen3.5
# mtp_num_hidden_layers, Nemotron-3-Super num_nextn_predict_layers) are not loaded by transformers
# (_keys_to_ignore_on_load_unexpected "mtp.*"), and kvsize leaves them out too.
# Published figures, rounded: T5 card "60 million / 220 million / 770 million parameters"; Whisper card table
# "small 244 M"; the hub ids name the rest ("30B-A3B", "120B-A12B", "35B-A3B", "122B-A10B", "397B-A17B").
TRANSFORMERS_ORACLE: list[tuple[str, int]] = [
    ("google-t5/t5-small", 60_506_624),
    ("google-t5/t5-base", 222_903_552),
    ("google-t5/t5-large", 737_668_096),
    ("facebook/bart-large-cnn", 406_291_456),
    ("openai/whisper-small", 241_734_912),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31_577_937_344),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", 31_577_937_344),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 120_668_687_360),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-NVFP4-FP8KV", 120_668_687_360),
    ("Qwen/Qwen3.5-35B-A3B", 35_107_181_936),  # includes the 446,571,248-parameter vision tower
    ("Qwen/Qwen3.6-35B-A3B", 35_107_181_936),
    ("nvidia/Qwen3.6-35B-A3B-NVFP4", 35_107_181_936),
    ("Qwen/Qwen3.5-122B-A10B", 122_562_817_776),
    ("nvidia/Qwen3.5-122B-A10B-NVFP4", 122_562_817_776),
    ("Qwen/Qwen3.5-397B-A17B", 396_802_360_816),
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", 396_802_360_816),
    ("ai21labs/AI21-Jamba-1.5-Mini", 51_570_323_328),  # by hand in test_jamba_1_5_mini_by_hand
]


@pytest.mark.parametrize(("hub_id", "expected"), TRANSFORMERS_ORACLE, ids=[e[0] for e in TRANSFORMERS_ORACLE])
def test_matches_transformers_meta_device_count(hub_id: str, expected: int) -> None:
    assert estimate(hub_id).total == expected


@pytest.mark.slow
@pytest.mark.parametrize(("hub_id", "expected"), TRANSFORMERS_ORACLE, ids=[e[0] for e in TRANSFORMERS_ORACLE])
def test_transformers_meta_device_oracle(hub_id: str, expected: int) -> None:
    """Rebuild each model with transformers on the meta device and count its parameters."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = {k: v for k, v in load(hub_id).items() if k not in ("quantization_config", "auto_map")}
    config = transformers.AutoConfig.for_model(**raw)
    classes = {
        "t5": transformers.AutoModelForSeq2SeqLM,
        "bart": transformers.AutoModelForSeq2SeqLM,
        "whisper": transformers.AutoModelForSpeechSeq2Seq,
        "qwen3_5_moe": transformers.AutoModelForImageTextToText,
    }
    with torch.device("meta"):
        model = classes.get(raw["model_type"], transformers.AutoModelForCausalLM).from_config(config)
    oracle = sum(p.numel() for p in model.parameters())
    assert oracle == expected
    assert estimate(hub_id).total == oracle


def test_jamba_1_5_mini_by_hand() -> None:
    # transformers modeling_jamba.py: layer i is attention when i % attn_layer_period (8) == attn_layer_offset (4)
    # (layers 4, 12, 20, 28), else JambaMambaMixer; its feed-forward is JambaSparseMoeBlock when
    # config.layers_num_experts[i] > 1, i.e. i % expert_layer_period (2) == expert_layer_offset (1): the 16 odd
    # layers, not all 32 (the old count, 92,075,724,800). Config: hidden 4096, intermediate 14336, vocab 65536,
    # 32 heads / 8 kv heads x 128, 16 experts top-2, mamba expand 2 (inner 8192), d_state 16, d_conv 4,
    # dt_rank 256, conv bias, no proj bias, untied head.
    embed_and_head = 2 * 65536 * 4096  # 536,870,912
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024  # q, o + k, v = 41,943,040
    mixer = (
        4096 * 16384  # in_proj 67,108,864
        + 8192 * 4
        + 8192  # conv1d + bias 40,960
        + 8192 * (256 + 32)  # x_proj 2,359,296
        + 256 * 8192
        + 8192  # dt_proj 2,105,344
        + 8192 * 16
        + 8192  # A_log, D 139,264
        + 8192 * 4096  # out_proj 33,554,432
        + 256
        + 16
        + 16  # dt/b/c layernorms
    )
    assert mixer == 105_308_448
    mlp = 3 * 4096 * 14336  # 176,160,768
    moe = 16 * mlp + 16 * 4096  # experts + router 2,818,637,824
    norms = 32 * 2 * 4096 + 4096  # 266,240
    total = embed_and_head + 4 * attention + 28 * mixer + 16 * mlp + 16 * moe + norms
    assert total == 51_570_323_328  # published: "52B total parameters, 12B active"
    result = estimate("ai21labs--AI21-Jamba-1.5-Mini")
    assert result.total == total
    assert result.active == total - 16 * (16 - 2) * mlp == 12_110_311_296


# Periodic MoE layers, small configs. Oracle: transformers 5.24 on the meta device (as above), whose decoder
# layers choose experts by: Qwen2/3-MoE, Qwen3-Next `layer_idx not in mlp_only_layers and (layer_idx + 1) %
# decoder_sparse_step == 0`; DeepSeek-V2/V3 `layer_idx >= first_k_dense_replace`; Llama 4 `layer_idx in
# config.moe_layers` (default range(step - 1, layers, step)); Jamba `layers_num_experts[layer_idx] > 1`.
_SMALL: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "num_hidden_layers": 8,
}
_MLA: dict[str, Any] = {
    "num_key_value_heads": 4,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 8,
}
_ERNIE: dict[str, Any] = {"moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 32}
PERIODIC_MOE: list[tuple[str, dict[str, Any], int]] = [
    (
        "qwen2_moe step 2, mlp_only 1 5",
        {"model_type": "qwen2_moe", **_SMALL, "num_experts": 4, "num_experts_per_tok": 2},
        292_032,
    ),
    ("qwen3_moe step 3, mlp_only 2", {"model_type": "qwen3_moe", **_SMALL, "head_dim": 16, "num_experts": 4}, 266_304),
    ("jamba attention 4/1, experts 4/3", {"model_type": "jamba", **_SMALL, "num_experts": 4}, 499_248),
    ("jamba one expert, dt_rank auto", {"model_type": "jamba", **_SMALL, "num_experts": 1}, 402_364),
    ("deepseek_v3 first_k_dense 2", {"model_type": "deepseek_v3", **_SMALL, **_MLA}, 447_360),
    ("deepseek_v2 first_k_dense 3", {"model_type": "deepseek_v2", **_SMALL, **_MLA}, 448_704),
    ("llama4_text interleave 3", {"model_type": "llama4_text", **_SMALL, "head_dim": 16}, 389_184),
    ("ernie4_5_moe layers 2-6 every 2nd", {"model_type": "ernie4_5_moe", **_SMALL, **_ERNIE}, 278_344),
    ("ernie4_5_moe end -1, untied, biased", {"model_type": "ernie4_5_moe", **_SMALL, **_ERNIE}, 393_728),
    ("ernie4_5_moe no shared, every 3rd", {"model_type": "ernie4_5_moe", **_SMALL, **_ERNIE}, 266_056),
]
_PERIODIC_EXTRA: dict[str, dict[str, Any]] = {
    "qwen2_moe step 2, mlp_only 1 5": {
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [1, 5],
    },
    "qwen3_moe step 3, mlp_only 2": {
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "decoder_sparse_step": 3,
        "mlp_only_layers": [2],
    },
    "jamba attention 4/1, experts 4/3": {
        "num_experts_per_tok": 2,
        "attn_layer_period": 4,
        "attn_layer_offset": 1,
        "expert_layer_period": 4,
        "expert_layer_offset": 3,
        "mamba_dt_rank": 8,
    },
    "jamba one expert, dt_rank auto": {"attn_layer_period": 8, "attn_layer_offset": 4},
    "deepseek_v3 first_k_dense 2": {"n_shared_experts": 1, "first_k_dense_replace": 2, "q_lora_rank": 24},
    "deepseek_v2 first_k_dense 3": {"n_shared_experts": 2, "first_k_dense_replace": 3, "q_lora_rank": None},
    "ernie4_5_moe layers 2-6 every 2nd": {
        "moe_num_shared_experts": 1,
        "moe_layer_start_index": 2,
        "moe_layer_end_index": 6,
        "moe_layer_interval": 2,
    },
    "ernie4_5_moe end -1, untied, biased": {
        "moe_num_shared_experts": 2,
        "moe_layer_start_index": 1,
        "moe_layer_end_index": -1,
        "moe_layer_interval": 1,
        "tie_word_embeddings": False,
        "use_bias": True,
    },
    "ernie4_5_moe no shared, every 3rd": {
        "moe_num_shared_experts": 0,
        "moe_layer_start_index": 0,
        "moe_layer_interval": 3,
    },
    "llama4_text interleave 3": {
        "intermediate_size_mlp": 80,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 3,
    },
}


def _periodic(name: str, base: dict[str, Any]) -> dict[str, Any]:
    return {**base, **_PERIODIC_EXTRA[name]}


@pytest.mark.parametrize(("name", "base", "expected"), PERIODIC_MOE, ids=[c[0] for c in PERIODIC_MOE])
def test_periodic_moe_layers_match_transformers(name: str, base: dict[str, Any], expected: int) -> None:
    assert estimate_parameters(_periodic(name, base)).total == expected


def test_periodic_moe_small_ernie_by_hand() -> None:
    # hidden 64, intermediate 96, vocab 100 (tied: Ernie4_5_MoeConfig default), 8 layers, 4 heads / 2 kv x 16,
    # no biases; MoE where (i + 1) % 2 == 0 and 2 <= i <= 6: layers 3, 5. Each MoE layer: 4 experts of
    # 3 x 64 x 32, router 4 x 64, e_score_correction_bias 4, one shared expert 3 x 64 x 32.
    attention = 2 * 64 * 64 + 2 * 64 * 32  # 12,288
    dense = 3 * 64 * 96  # 18,432
    moe = 4 * 3 * 64 * 32 + 4 * 64 + 4 + 3 * 64 * 32  # 30,980
    total = 100 * 64 + 8 * attention + 6 * dense + 2 * moe + 8 * 2 * 64 + 64
    assert total == 278_344
    name, base, _ = PERIODIC_MOE[7]
    assert estimate_parameters(_periodic(name, base)).total == total


def test_periodic_moe_small_jamba_by_hand() -> None:
    # hidden 64, intermediate 96, vocab 100, 8 layers, 4 heads / 2 kv heads x 16, 4 experts; attention at
    # i % 4 == 1 (layers 1, 5), experts at i % 4 == 3 (layers 3, 7); mamba inner 128, state 16, conv 4, dt_rank 8.
    attention = 2 * 64 * 64 + 2 * 64 * 32  # 12,288
    mixer = 64 * 256 + 128 * 4 + 128 + 128 * (8 + 32) + 8 * 128 + 128 + 128 * 16 + 128 + 128 * 64 + 8 + 32
    mlp = 3 * 64 * 96  # 18,432
    moe = 4 * mlp + 4 * 64
    total = 2 * 100 * 64 + 2 * attention + 6 * mixer + 6 * mlp + 2 * moe + 8 * 2 * 64 + 64
    assert total == 499_248


@pytest.mark.slow
@pytest.mark.parametrize(("name", "base", "expected"), PERIODIC_MOE, ids=[c[0] for c in PERIODIC_MOE])
def test_periodic_moe_transformers_oracle(name: str, base: dict[str, Any], expected: int) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(**_periodic(name, base))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == expected


def test_t5_small_by_hand() -> None:
    # modeling_t5.py: d_model 512, num_heads 8 x d_kv 64 = 512, d_ff 2048, 6 + 6 layers, vocab 32128, relu FFN.
    #   shared embedding (also both embed_tokens and the tied lm_head): 32128 x 512 = 16,449,536
    #   attention q/k/v/o, no bias: 4 x 512 x 512 = 1,048,576; FFN wi + wo: 2 x 512 x 2048 = 2,097,152
    #   encoder block: 1,048,576 + 2,097,152 + 2 T5LayerNorm x 512 = 3,146,752; x 6 = 18,880,512
    #   decoder block: 2 x 1,048,576 (self + EncDecAttention) + 2,097,152 + 3 x 512 = 4,195,840; x 6 = 25,175,040
    #   relative_attention_bias in block 0 of each stack: 2 x 32 buckets x 8 heads = 512; final norms 2 x 512
    #   total 16,449,536 + 18,880,512 + 25,175,040 + 512 + 1,024 = 60,506,624
    result = estimate("google-t5/t5-small")
    assert result.total == 60_506_624
    assert "lm_head" not in result.breakdown and result.active is None


def test_t5_v1_1_untied_head_is_counted() -> None:
    # Flan-T5 / T5 v1.1 shape (t5-base dims, feed_forward_proj "gated-gelu", tie_word_embeddings false): the
    # checkpoint stores lm_head.weight apart. Gated FFN wi_0 + wi_1 + wo = 3 x 768 x 3072 = 7,077,888 vs 2 x.
    #   t5-base 222,903,552 + 24 blocks x 768 x 3072 (wi_1) = 279,527,424; + lm_head 32128 x 768 = 24,674,304
    raw = load("google-t5/t5-base") | {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    assert estimate_parameters(raw).total == 222_903_552 + 24 * 768 * 3072 + 32128 * 768


def test_bart_large_by_hand() -> None:
    # modeling_bart.py: d_model 1024, ffn 4096, 12 + 12 layers, vocab 50265, max_position_embeddings 1024.
    #   shared embedding (tied lm_head): 50265 x 1024 = 51,471,360
    #   learned positions (2 offset rows) per stack: 1026 x 1024 = 1,050,624; layernorm_embedding 2 x 1024
    #   attention q/k/v/out with biases: 4 x (1024^2 + 1024) = 4,198,400
    #   fc1 + fc2: 1024 x 4096 + 4096 + 4096 x 1024 + 1024 = 8,393,728
    #   encoder layer: 4,198,400 + 8,393,728 + 2 LayerNorms x 2048 = 12,596,224; x 12 + 1,050,624 + 2048
    #     = 152,207,360
    #   decoder layer: 2 x 4,198,400 + 8,393,728 + 3 x 2048 = 16,796,672; x 12 + 1,050,624 + 2048 = 202,612,736
    #   total 51,471,360 + 152,207,360 + 202,612,736 = 406,291,456 (final_logits_bias is a buffer)
    result = estimate("facebook/bart-large-cnn")
    assert result.total == 406_291_456
    assert any("final_logits_bias" in note for note in result.notes)


def test_whisper_small_by_hand() -> None:
    # modeling_whisper.py: d_model 768, ffn 3072, 12 + 12 layers, 80 mel bins, 1500 / 448 positions.
    #   conv1 80 x 768 x 3 + 768 = 185,088; conv2 768 x 768 x 3 + 768 = 1,770,240; positions 1500 x 768
    #   attention, k_proj without bias: 4 x 768^2 + 3 x 768 = 2,361,600; fc1 + fc2 = 2,362,368 + 2,360,064
    #   encoder layer 2,361,600 + 4,722,432 + 2 x 1536 = 7,087,104; x 12 = 85,045,248 + layer_norm 1536
    #     encoder = 185,088 + 1,770,240 + 1,152,000 + 85,045,248 + 1536 = 88,154,112
    #   decoder layer 2 x 2,361,600 + 4,722,432 + 3 x 1536 = 9,450,240; x 12 = 113,402,880
    #     decoder = 51865 x 768 (embed_tokens, tied proj_out) 39,832,320 + 448 x 768 + 113,402,880 + 1536
    #     = 153,580,800; total 241,734,912
    assert estimate("openai/whisper-small").total == 88_154_112 + 153_580_800


def test_nemotron_3_nano_by_hand() -> None:
    # modeling_nemotron_h.py, hidden 2688; pattern: 23 M (Mamba2), 23 E (MoE), 6 * (attention), each + RMSNorm.
    #   Mamba2: 64 heads x 64 = 4096 inner, conv_dim 4096 + 2 x 8 groups x 128 state = 6144
    #     in_proj 2688 x (4096 + 6144 + 64) = 27,697,152; conv1d 6144 x 4 + 6144 bias = 30,720;
    #     dt_bias, A_log, D 3 x 64; gated norm 4096; out_proj 4096 x 2688 = 11,010,048 -> 38,742,208
    #   attention (32 q heads, 2 kv, head_dim 128): 2 x 2688 x 4096 + 2 x 2688 x 256 = 23,396,352
    #   MoE: 128 experts x (up + down) 2 x 1856 x 2688 = 1,277,165,568; router 128 x 2688 = 344,064;
    #     shared MLP 2 x 2688 x 3712 = 19,955,712 -> 1,297,465,344
    #   embeddings + lm_head 2 x 131072 x 2688 = 704,643,072; norms 53 x 2688 = 142,464
    #   total 704,643,072 + 23 x 38,742,208 + 6 x 23,396,352 + 23 x 1,297,465,344 + 142,464 = 31,577,937,344
    #   active: 122 of 128 experts idle per MoE layer: total - 23 x 122 x 9,977,856 = 3,580,073,408
    #   (card: "31.6B total parameters, ... 3.6B including embeddings" active, in line)
    result = estimate("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert result.total == 31_577_937_344
    assert result.active == 31_577_937_344 - 23 * 122 * 2 * 1856 * 2688


def test_nemotron_3_super_latent_experts() -> None:
    # Super: 512 experts work in moe_latent_size 1024: up + down 2 x 2688 x 1024 each, plus fc1/fc2_latent_proj
    # 2 x 4096 x 1024 per MoE layer; 22 of 512 experts active.
    result = estimate("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert result.breakdown["experts"] == 40 * 512 * 2 * 2688 * 1024  # 40 'E' layers
    assert result.active == result.total - 40 * (512 - 22) * 2 * 2688 * 1024
    assert any("multi-token-prediction" in note for note in result.notes)


def test_qwen3_5_moe_by_hand() -> None:
    # modeling_qwen3_5_moe.py, text: hidden 2048, 40 layers = 30 Gated DeltaNet + 10 full attention (every 4th),
    # all MoE; vocab 248320 untied.
    #   embed + lm_head 2 x 248320 x 2048 = 1,017,118,720
    #   full attention (16 q heads x 256, q_proj doubled for the output gate; 2 kv heads): 2048 x 8192 +
    #     2 x 2048 x 512 + 4096 x 2048 + q/k norm 2 x 256 = 27,263,488
    #   Gated DeltaNet (key 16 x 128 = 2048, value 32 x 128 = 4096): in_proj_qkv 2048 x 8192, in_proj_z
    #     2048 x 4096, in_proj_b/a 2 x 2048 x 32, conv1d 8192 x 4, dt_bias + A_log 64, norm 128, out_proj
    #     4096 x 2048 = 33,718,464
    #   MoE: 256 experts x 3 x 2048 x 512 = 805,306,368; router 256 x 2048; shared expert 3 x 2048 x 512;
    #     shared_expert_gate 2048 -> 808,978,432
    #   norms 40 x 2 x 2048 + 2048
    #   vision (depth 27, width 1152, MLP 4304): patch Conv3d 3 x 2 x 16 x 16 x 1152 + 1152 = 1,770,624;
    #     pos_embed 2304 x 1152 = 2,654,208; block 2 LayerNorm 4608 + qkv/proj 4 x (1152^2 + 1152) +
    #     fc1/fc2 1152 x 4304 + 4304 + 4304 x 1152 + 1152 = 15,239,504, x 27 = 411,466,608;
    #     merger LayerNorm 2304 + 4608^2 + 4608 + 4608 x 2048 + 2048 = 30,679,808 -> 446,571,248
    text = 1_017_118_720 + 10 * 27_263_488 + 30 * 33_718_464 + 40 * 808_978_432 + 40 * 4096 + 2048
    result = estimate("Qwen/Qwen3.5-35B-A3B")
    assert result.breakdown["vision"] == 446_571_248
    assert result.total == text + 446_571_248
    assert result.active == result.total - 40 * (256 - 8) * 3 * 2048 * 512
    assert any("mtp_num_hidden_layers" in note for note in result.notes)


def test_nemotron_h_layers_block_type_list() -> None:
    # transformers 5 configs may spell the pattern as names (configuration_nemotron_h.py _pattern_to_list).
    raw = load("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    names = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
    raw["layers_block_type"] = [names[ch] for ch in raw.pop("hybrid_override_pattern")]
    assert estimate_parameters(raw).total == 31_577_937_344


def test_breakdown_sums_to_total() -> None:
    for entry in registry_entries().values():
        if entry.hub_id in PARAMS_GAPS:
            with pytest.raises(ConfigError, match="cannot count"):
                estimate_parameters(load_registry_config(entry))
            continue
        result = estimate_parameters(load_registry_config(entry))
        assert sum(result.breakdown.values()) == result.total, entry.hub_id
        assert result.total > 0


def test_bf16_checkpoint_size_is_two_bytes_per_parameter() -> None:
    # source: Llama 3.1 8B derivative card "15.0 GiB of safetensors weights (16,060,556,376 bytes) in BF16"
    # (index id 65745610209); the difference is the safetensors headers.
    assert estimate("meta-llama--Llama-3.1-8B").total * 2 == pytest.approx(16_060_556_376, rel=1e-4)


def test_vision_tower_noted_when_counted() -> None:
    result = estimate("google--gemma-3-4b-it")
    assert result.breakdown["vision"] > 0
    assert any("vision" in note for note in result.notes)


def test_vision_tower_without_sizes_is_noted_not_counted() -> None:
    raw = load("llava-hf--llava-1.5-7b-hf")
    raw["vision_config"] = {"model_type": "clip_vision_model", "hidden_size": 1024}
    result = estimate_parameters(raw)
    assert "vision" not in result.breakdown
    assert any("vision tower not counted" in note for note in result.notes)


def test_nemotron_nas_ffn_rule() -> None:
    from kvsize.params import _deci_ffn_size

    assert _deci_ffn_size(5.25, 8192) == 28672  # the Llama-3.3-70B MLP width
    assert _deci_ffn_size(1.3125, 8192) == 7168
    result = estimate("nvidia--Llama-3_3-Nemotron-Super-49B-v1")
    # source: model card name and text only give "49B" (no exact count found): 49.87B is 1.8% above it.
    assert result.total == pytest.approx(49e9, rel=0.02)


# ------------------------------------------------------------------------------------------ errors


def test_missing_hidden_size_names_the_field() -> None:
    raw = load("meta-llama--Llama-3.1-8B")
    del raw["hidden_size"]
    raw["model_type"] = "custom"
    with pytest.raises(ConfigError, match="'hidden_size'"):
        estimate_parameters(raw)


def test_missing_nested_field_names_its_path() -> None:
    raw = load("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    del raw["text_config"]["num_hidden_layers"]
    with pytest.raises(ConfigError, match=r"'text_config\.num_hidden_layers'"):
        estimate_parameters(raw)


def test_missing_mla_rank_names_the_field() -> None:
    raw = load("deepseek-ai--DeepSeek-V3")
    del raw["qk_nope_head_dim"]
    with pytest.raises(ConfigError, match="'qk_nope_head_dim'"):
        estimate_parameters(raw)


def test_missing_ffn_mult_names_the_block() -> None:
    raw = load("nvidia--Llama-3_3-Nemotron-Super-49B-v1")
    del raw["block_configs"][3]["ffn"]["ffn_mult"]
    with pytest.raises(ConfigError, match=r"block_configs\[3\]\.ffn\.ffn_mult"):
        estimate_parameters(raw)


def test_bad_field_type() -> None:
    raw = load("meta-llama--Llama-3.1-8B")
    raw["num_hidden_layers"] = "32"
    with pytest.raises(ConfigError, match="'num_hidden_layers' must be an integer"):
        estimate_parameters(raw)


def test_hybrid_pattern_length_mismatch() -> None:
    raw = load("nvidia--Nemotron-H-56B-Base-8K")
    raw["num_hidden_layers"] = 117
    with pytest.raises(ConfigError, match="hybrid_override_pattern"):
        estimate_parameters(raw)


def test_nemotron_h_without_layer_pattern_names_the_field() -> None:
    raw = load("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    del raw["hybrid_override_pattern"]
    with pytest.raises(ConfigError, match="'hybrid_override_pattern'"):
        estimate_parameters(raw)


def test_not_an_object() -> None:
    with pytest.raises(ConfigError, match="JSON object"):
        estimate_parameters([1, 2])  # type: ignore[arg-type]


def test_messages_are_one_line() -> None:
    raw = load("meta-llama--Llama-3.1-8B")
    del raw["vocab_size"]
    raw["model_type"] = "custom"
    with pytest.raises(ConfigError) as info:
        estimate_parameters(raw)
    assert "\n" not in str(info.value)


def test_dense_qwen3_5_matches_transformers() -> None:
    # Dense Qwen3.5 (model_type qwen3_5 / qwen3_5_text): the 35B-A3B config with the MoE fields removed,
    # intermediate_size 6144 and 8 layers. Oracle: Qwen3_5ForConditionalGeneration(config) on the meta device,
    # transformers 5.24: 2,022,552,432 parameters (vision tower included).
    raw = load("Qwen/Qwen3.5-35B-A3B")
    raw["model_type"] = "qwen3_5"
    raw["vision_config"]["model_type"] = "qwen3_5"
    text = raw["text_config"]
    for key in ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"):
        del text[key]
    text.update(model_type="qwen3_5_text", intermediate_size=6144, num_hidden_layers=8)
    text["layer_types"] = text["layer_types"][:8]
    result = estimate_parameters(raw)
    assert result.total == 2_022_552_432
    assert result.active is None


# A 4-layer Gemma 4 language model, hidden 64, 4 query heads, 2 KV heads of 16 (the Gemma 4 tests below).
GEMMA4_TINY: dict[str, Any] = {
        "model_type": "gemma4_text",
        "vocab_size": 512,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
}


def test_per_layer_embeddings_gemma4() -> None:
    # Gemma 4 / Gemma 3n per-layer embeddings (transformers 5.24 Gemma4TextModel, Gemma4TextDecoderLayer), by hand
    # for 4 layers, P = hidden_size_per_layer_input 8, hidden 64, vocab_size_per_layer_input 384:
    # embed_tokens_per_layer 384 x (4 x 8) = 12,288; per_layer_model_projection 64 x 32 = 2,048; its norm 8;
    # per layer per_layer_input_gate 64 x 8 + per_layer_projection 8 x 64 + post_per_layer_input_norm 64 = 1,088,
    # x 4 = 4,352: 18,696 (transformers' own count of the same two tiny models differs by exactly this)
    base = GEMMA4_TINY
    ple = {**base, "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 384}
    delta = estimate_parameters(ple).total - estimate_parameters(base).total
    assert delta == 384 * 32 + 64 * 32 + 8 + 4 * (64 * 8 + 8 * 64 + 64) == 18_696
    # the near twin: without vocab_size_per_layer_input the per-layer table has vocab_size rows
    no_vocab = {**base, "hidden_size_per_layer_input": 8}
    assert estimate_parameters(no_vocab).total - estimate_parameters(base).total == 18_696 + (512 - 384) * 32


# Gemma 4's language model, against transformers 5.24 itself (Gemma4ForCausalLM built on the meta device):
# the registry's three layouts (MoE with attention_k_eq_v, dense 31B, E2B with per-layer embeddings, KV-shared
# layers and their double-wide MLP) count exactly what transformers allocates.
@pytest.mark.parametrize(
    ("hub_id", "total"),
    [
        ("google/gemma-4-26B-A4B", 25_233_141_760),
        ("google/gemma-4-31B-it", 30_697_345_280),
        ("google/gemma-4-E2B-it", 4_628_569_344),
    ],
)
def test_gemma4_parameters_match_transformers(hub_id: str, total: int) -> None:
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    text = registry_config(hub_id)["text_config"]
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(CONFIG_MAPPING["gemma4_text"].from_dict(text))
    assert sum(p.numel() for p in model.parameters()) == total
    assert estimate_parameters(text).total == total


# Gemma 4's towers (transformers 5.24 modeling_gemma4.py Gemma4VisionModel, Gemma4AudioModel and their
# Gemma4MultimodalEmbedder), worked by hand from the registry configs.
# gemma-4-31B-it vision: hidden H 1152, 27 layers, 16 heads (and KV heads) of 72, MLP 4304, patch 16, 10,240
# positions, standardize true, no clipped linears:
#   patch embedder 3 x 16^2 x 1152 + 2 x 10,240 x 1152 = 884,736 + 23,592,960 = 24,477,696;
#   a layer: q, k, v, o 4 x 1152 x 1152 = 5,308,416, q/k norms 2 x 72 = 144, four norms 4,608, MLP 3 x 1152 x 4304
#   = 14,874,624: 20,187,792, x 27 = 545,070,384; std_bias + std_scale 2 x 1152 = 2,304;
#   the embedder 1152 x 5376 (the text hidden) = 6,193,152. Vision in all 575,743,536.
# gemma-4-E2B-it vision: H 768, 16 layers, 12 heads of 64, MLP 3072, clipped linears (4 buffers x 7 a layer),
#   no standardize: 3 x 256 x 768 + 2 x 10,240 x 768 = 589,824 + 15,728,640 = 16,318,464; a layer
#   4 x 768^2 = 2,359,296 + 128 + 3,072 + 3 x 768 x 3072 = 7,077,888, + 28 = 9,440,412, x 16 = 151,046,592;
#   the embedder 768 x 1536 = 1,179,648. Vision 168,544,704.
# gemma-4-E2B-it audio: hidden A 1024, 12 Conformer layers, 8 heads, channels (128, 32), kernel 5, output 1536:
#   subsampling 9 x 128 + 128 + 9 x 128 x 32 + 32 + (128 // 4) x 32 x 1024 = 1,086,752; a layer: feed-forwards
#   2 x (8 A^2 + 2 A) = 16,781,312, attention 5 A^2 + 128 = 5,243,008, light conv 3 A^2 + 5 A + 2 A = 3,152,896,
#   norms 3 A = 3,072, clipped buffers 40: 25,180,328, x 12 = 302,163,936; output_proj 1024 x 1536 + 1536 =
#   1,574,400; the embedder 1536 x 1536 = 2,359,296. Audio 307,184,384.
@pytest.mark.parametrize(
    ("hub_id", "vision", "audio"),
    [
        ("google/gemma-4-31B-it", 575_743_536, None),
        ("google/gemma-4-E2B-it", 168_544_704, 307_184_384),
    ],
)
def test_gemma4_towers_by_hand(hub_id: str, vision: int, audio: int | None) -> None:
    counted = estimate_parameters(registry_config(hub_id))
    assert counted.breakdown["vision"] == vision
    assert counted.breakdown.get("audio") == audio
    assert counted.total == estimate_parameters(registry_config(hub_id)["text_config"]).total + vision + (audio or 0)


def test_gemma4_towers_match_transformers() -> None:
    # Built on the meta device: parameters plus the persistent buffers the checkpoint holds (state_dict), and
    # each tower's embedder.
    import torch
    from transformers.models.gemma4 import modeling_gemma4
    from transformers.models.gemma4.configuration_gemma4 import Gemma4Config

    def held(module: torch.nn.Module) -> int:
        return sum(t.numel() for t in module.state_dict().values())

    config = Gemma4Config(**registry_config("google/gemma-4-E2B-it"))
    with torch.device("meta"):
        vision = modeling_gemma4.Gemma4VisionModel(config.vision_config)
        audio = modeling_gemma4.Gemma4AudioModel(config.audio_config)
        vision_embedder = modeling_gemma4.Gemma4MultimodalEmbedder(config.vision_config, config.text_config)
        audio_embedder = modeling_gemma4.Gemma4MultimodalEmbedder(config.audio_config, config.text_config)
    counted = estimate_parameters(registry_config("google/gemma-4-E2B-it")).breakdown
    assert counted["vision"] == held(vision) + held(vision_embedder)
    assert counted["audio"] == held(audio) + held(audio_embedder)


def test_gemma4_layer_parts_by_hand() -> None:
    # 4 layers (sliding, full, sliding, full), hidden 64, 4 query heads; sliding: 2 KV heads x head_dim 16; full:
    # global_head_dim 32 with attention_k_eq_v, so num_global_key_value_heads 1 and no v_proj.
    # sliding: q 64x64 + q_norm 16 + k 64x32 + k_norm 16 + v 64x32 + o 64x64 = 12,320
    # full:    q 64x128 + q_norm 32 + k 64x32 + k_norm 32 + o 128x64 = 18,496
    # MLP 3 x 64 x 128 = 24,576 a layer; four norms 256 a layer; final norm 64; tied embedding 512 x 64
    cfg = {
        **GEMMA4_TINY,
        "global_head_dim": 32,
        "num_global_key_value_heads": 1,
        "attention_k_eq_v": True,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    }
    est = estimate_parameters(cfg)
    assert est.breakdown["attention"] == 2 * 12_320 + 2 * 18_496
    assert est.total == 512 * 64 + 2 * 12_320 + 2 * 18_496 + 4 * (24_576 + 256) + 64 == 193_792
    # the near twin: the last 2 layers share KV: no k_proj, k_norm (and the full one's v_proj is already gone)
    shared = estimate_parameters({**cfg, "num_kv_shared_layers": 2})
    assert est.total - shared.total == (64 * 32 + 16 + 64 * 32) + (64 * 32 + 32)
    # and with use_double_wide_mlp those two layers' MLPs are twice as wide
    wide = estimate_parameters({**cfg, "num_kv_shared_layers": 2, "use_double_wide_mlp": True})
    assert wide.total - shared.total == 2 * 24_576



def test_qwen3_vl_vision_counts_its_deepstack_mergers() -> None:
    # Qwen3-VL-2B (transformers 5.24 modeling_qwen3_vl.py Qwen3VLVisionModel): merged width 1024 x 2^2 = 4096,
    # out 2048; each of the three deepstack mergers (deepstack_visual_indexes [5, 11, 17]) is a LayerNorm of the
    # merged width (use_postshuffle_norm: 2 x 4096) + fc1 4096 x 4096 + 4096 + fc2 4096 x 2048 + 2048
    # = 8,192 + 16,781,312 + 8,390,656 = 25,180,160; 3 x 25,180,160 = 75,540,480 above the Qwen3.5 tower rule.
    raw = registry_config("Qwen/Qwen3-VL-2B-Instruct")
    without = {**raw, "vision_config": {**raw["vision_config"], "deepstack_visual_indexes": []}}
    assert (
        estimate_parameters(raw).breakdown["vision"] - estimate_parameters(without).breakdown["vision"] == 75_540_480
    )


@pytest.mark.parametrize(
    "hub_id", ["Qwen/Qwen3-VL-2B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-235B-A22B-Thinking"]
)
def test_qwen3_vl_vision_matches_transformers(hub_id: str) -> None:
    # Built on the meta device from the registry config (the Thinking config leaves num_position_embeddings and
    # deepstack_visual_indexes to the config class's defaults, 2304 and [8, 16, 24]).
    import torch
    from transformers.models.qwen3_vl import modeling_qwen3_vl
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLConfig
    from transformers.models.qwen3_vl_moe import modeling_qwen3_vl_moe
    from transformers.models.qwen3_vl_moe.configuration_qwen3_vl_moe import Qwen3VLMoeConfig

    raw = registry_config(hub_id)
    moe = raw["model_type"] == "qwen3_vl_moe"
    config = (Qwen3VLMoeConfig if moe else Qwen3VLConfig)(**raw)
    tower = modeling_qwen3_vl_moe.Qwen3VLMoeVisionModel if moe else modeling_qwen3_vl.Qwen3VLVisionModel
    with torch.device("meta"):
        vision = tower._from_config(config.vision_config)
    assert estimate_parameters(raw).breakdown["vision"] == sum(t.numel() for t in vision.state_dict().values())


# Devstral-Small-2 (Mistral3ForConditionalGeneration, a Pixtral tower), by hand: vision width 1024, 24 layers,
# 16 heads of 64, MLP 4096, patch 14: patch conv 3 x 14^2 x 1024 = 602,112, ln_pre 1,024, a layer 2 x 1024 +
# 4 x 1024^2 + 3 x 1024 x 4096 = 16,779,264, x 24 = 402,702,336: 403,305,472. The projector (no bias): norm 1,024,
# patch merger 4096 x 1024 = 4,194,304, linear_1 1024 x 5120 = 5,242,880, linear_2 5120^2 = 26,214,400:
# 35,652,608. In all 438,958,080.
def test_pixtral_tower_by_hand_and_against_transformers() -> None:
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.llava import modeling_llava
    from transformers.models.mistral3 import modeling_mistral3
    from transformers.models.pixtral import modeling_pixtral

    raw = registry_config("mistralai/Devstral-Small-2-24B-Instruct-2512")
    assert estimate_parameters(raw).breakdown["vision"] == 403_305_472 + 35_652_608
    # The same tower under a LLaVA wrapper (Pixtral-12B's layout): LlavaMultiModalProjector, biased by default.
    llava = {k: v for k, v in raw.items() if k not in ("multimodal_projector_bias", "spatial_merge_size")}
    llava = {**llava, "model_type": "llava", "architectures": ["LlavaForConditionalGeneration"]}
    with torch.device("meta"):
        tower = modeling_pixtral.PixtralVisionModel(CONFIG_MAPPING["pixtral"](**raw["vision_config"]))
        m3 = modeling_mistral3.Mistral3MultiModalProjector(CONFIG_MAPPING["mistral3"](**raw))
        lv = modeling_llava.LlavaMultiModalProjector(CONFIG_MAPPING["llava"](**llava))
    held = [sum(t.numel() for t in m.state_dict().values()) for m in (tower, m3, lv)]
    assert estimate_parameters(raw).breakdown["vision"] == held[0] + held[1]
    assert estimate_parameters(llava).breakdown["vision"] == held[0] + held[2]


# LFM2.5-VL-1.6B, by hand (transformers 5.24 modeling_lfm2.py, modeling_siglip2.py, modeling_lfm2_vl.py).
# Language model: hidden 2048, 16 layers (6 full_attention, 10 conv), 32 heads / 8 KV heads of 64, vocab 65,536,
# tied embeddings: the feed-forward width int(2 x 12,288 / 3) = 8,192 (x 1.0, already a multiple of 256), so
# 3 x 2048 x 8192 = 50,331,648 a layer, x 16 = 805,306,368; attention 2 x 2048^2 + 2 x 2048 x 512 + 2 x 64 =
# 10,485,888, x 6 = 62,915,328; the short conv 2048 x 6144 + 2048 x 3 + 2048^2 = 16,783,360, x 10 = 167,833,600;
# norms 2 x 2048 x 16 + 2048 = 67,584; embeddings 65,536 x 2048 = 134,217,728: 1,170,340,608.
# SigLIP2 tower: patch Linear 768 x 1152 + 1152 = 885,888, positions 256 x 1152 = 294,912, 27 layers of
# 2 x 2 x 1152 + 4 x (1152^2 + 1152) + 2 x 1152 x 4304 + 4304 + 1152 = 15,239,504 (411,466,608), post LayerNorm
# 2,304: 412,649,712. Projector (pixel unshuffle 1152 x 2^2 = 4608, no LayerNorm, biased): 4608 x 2048 + 2048 +
# 2048 x 2048 + 2048 = 13,635,584. In all 1,596,625,904.
def test_lfm2_vl_by_hand_and_against_transformers() -> None:
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.lfm2_vl import modeling_lfm2_vl

    raw = registry_config("LiquidAI/LFM2.5-VL-1.6B")
    counted = estimate_parameters(raw)
    assert estimate_parameters(raw["text_config"]).total == 1_170_340_608
    assert counted.breakdown["vision"] == 412_649_712 + 13_635_584
    assert counted.total == 1_596_625_904
    with torch.device("meta"):
        model = modeling_lfm2_vl.Lfm2VlForConditionalGeneration(CONFIG_MAPPING["lfm2_vl"](**raw))
    assert counted.total == sum(p.numel() for p in model.parameters())  # tied: lm_head is the embedding


def test_lfm2_feed_forward_width_rules() -> None:
    # Lfm2MLP: int(2 x I / 3), x block_ffn_dim_multiplier and rounded up to block_multiple_of; an explicit null
    # multiplier (older configs; transformers 5.24 refuses it) skips both. Checked against 5.24 on the meta device.
    # I = 1000, hidden 64: int(666.67) = 666 -> 3 x 64 x 666 per layer; x 1.5 = 999 -> 1,024 (multiple of 256).
    base = {
        "model_type": "lfm2",
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 10,
        "intermediate_size": 1000,
        "layer_types": ["conv"],
    }
    mlp = estimate_parameters({**base, "block_ffn_dim_multiplier": None}).breakdown["mlp"]
    assert mlp == 3 * 64 * 666
    assert estimate_parameters({**base, "block_ffn_dim_multiplier": 1.5}).breakdown["mlp"] == 3 * 64 * 1024
    assert estimate_parameters({**base, "block_auto_adjust_ff_dim": False}).breakdown["mlp"] == 3 * 64 * 1000
    # Left out, the multiplier is Lfm2Config's 1.0: 666 rounded up to 768.
    assert estimate_parameters(base).breakdown["mlp"] == 3 * 64 * 768


def test_qwen3_vl_vision_defaults_match_transformers() -> None:
    # A Qwen3-VL config whose vision_config names nothing takes Qwen3VLVisionConfig's defaults (depth 27, hidden
    # 1152, MLP 4304, patch 16, merge 2, temporal 2, out 3584, 2304 positions, three deepstack mergers): the same
    # tower transformers builds from an empty vision config.
    import torch
    from transformers.models.qwen3_vl import modeling_qwen3_vl
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig

    raw = {**registry_config("Qwen/Qwen3-VL-2B-Instruct"), "vision_config": {}}
    with torch.device("meta"):
        tower = modeling_qwen3_vl.Qwen3VLVisionModel._from_config(Qwen3VLVisionConfig())
    assert estimate_parameters(raw).breakdown["vision"] == sum(t.numel() for t in tower.state_dict().values())


def test_siglip2_channels_default_to_3() -> None:
    # Siglip2VisionConfig: num_channels 3 when left out.
    raw = registry_config("LiquidAI/LFM2.5-VL-1.6B")
    vision = {k: v for k, v in raw["vision_config"].items() if k != "num_channels"}
    assert estimate_parameters({**raw, "vision_config": vision}).total == estimate_parameters(raw).total


def test_ernie_negative_shared_experts_are_bad_input() -> None:
    # moe_num_shared_experts counts MLPs: 0 means none, -1 is refused, not read as minus one shared expert.
    name, base, _ = PERIODIC_MOE[7]
    config = {**_periodic(name, base), "moe_num_shared_experts": -1}
    with pytest.raises(ConfigError, match="moe_num_shared_experts"):
        estimate_parameters(config)


def test_qwen2_5_vl_temporal_patch_defaults_to_2() -> None:
    # Qwen2_5_VLVisionConfig (transformers 5.24): temporal_patch_size 2 when the config leaves it out.
    raw = registry_config("Qwen/Qwen2.5-VL-7B-Instruct")
    vision = {k: v for k, v in raw["vision_config"].items() if k != "temporal_patch_size"}
    assert (
        estimate_parameters({**raw, "vision_config": vision}).breakdown["vision"]
        == estimate_parameters({**raw, "vision_config": {**vision, "temporal_patch_size": 2}}).breakdown["vision"]
    )
