"""Hugging Face transformers: the tensors a `DynamicCache` or `StaticCache` really holds after a forward.

Rules read from transformers 5.24.0 and 5.25.0 (`transformers/cache_utils.py` and the modeling files named beside
each rule; research notes: ENGINES.md §3; what changed between releases is tabled in HF_RULES) and checked to the
byte by tests/test_hf_oracle.py, which runs every registry model on the meta device and sums the cache's tensors:

- One cache layer per decoder layer, typed by `get_layer_types_and_kwargs` (cache_utils.py): `full_attention`
  -> `DynamicLayer`, `sliding_attention` / `chunked_attention` -> `DynamicSlidingWindowLayer`,
  `linear_attention` -> `LinearAttentionLayer`, `hybrid` -> both, `moe` / `mlp` / KV-sharing `reuse` ->
  `DummyLayer` (nothing stored).
- Full layers keep K `[B, H_kv, S, D_k]` and V `[B, H_kv, S, D_v]` in the activation dtype (`DynamicLayer.update`
  concatenates along S); the heads are the un-repeated KV heads (`repeat_kv` runs inside attention).
- Sliding and chunked layers keep the last `W - 1` tokens: `DynamicSlidingWindowLayer.update` slices
  `full_states[:, :, -W + 1:]` (so `W == 1` keeps everything, as that slice is `[0:]`).
- `StaticCache(max_cache_len)`: `StaticLayer.lazy_initialization` allocates `max_cache_len` tokens zero-filled;
  `StaticSlidingWindowLayer` allocates `min(W, max_cache_len)`.
- MLA (`DeepseekV3Attention.forward`, models/deepseek_v3/modeling_deepseek_v3.py): since 5.15 the latent
  `[B, 1, S, kv_lora_rank]` (keys slot) and the roped key `[B, 1, S, qk_rope_head_dim]` (values slot); before
  5.15 the decompressed per-head K `[B, H, S, qk_nope + qk_rope]` and V `[B, H, S, v_head_dim]`.
- DeepSeek sparse attention (DeepSeek-V3.2, GLM-5; layer type `indexed_attention`): `DynamicIndexedLayer` /
  `StaticIndexedLayer` add the indexer's key `[B, S, index_head_dim]` in the activation dtype beside the latent
  (`DeepseekV32Indexer.forward` -> `cache.update_indexer`; models/deepseek_v32, models/glm_moe_dsa, 5.24).
- Recurrent layers (`LinearAttentionLayer.update_conv_state` / `update_recurrent_state`): the conv state keeps
  the full kernel, `[B, conv_dim, conv_kernel]`, in the activation dtype; the recurrent state is whatever the
  mixer hands over, float32 on every torch path (Qwen3NextGatedDeltaNet's chunked delta rule, Mamba2's
  `mamba2_chunk_scan`, Mamba's selective scan all compute the final state in float32).
- `QuantizedCache(backend="fp8")` (`Fp8QuantizedLayer`): 1 byte per element (float8_e4m3fn), appended
  without re-quantization, plus one 0-dim float32 scale for K and one for V per layer (8 bytes per layer, not
  per request: reported by `kvsize verify` as scalar bookkeeping). Only for models whose layers are all
  `full_attention` (`QuantizedCache.__init__` refuses others).
- Layers of one model with different KV heads or head sizes keep their own (models/gemma4/modeling_gemma4.py
  Gemma4TextAttention: full layers `per_layer_config[i].head_dim` = global_head_dim and, with attention_k_eq_v,
  num_global_key_value_heads; K = V layers still store K and V; models/mimo_v2_flash/modeling_mimo_v2_flash.py
  MiMoV2FlashAttention: sliding layers 2 x num_key_value_heads, K head_dim / V v_head_dim on every layer).
  KV-sharing consumers (`kv_sharing_modes` "reuse", Gemma 3n / 4) get a `DummyLayer`.
- Head counts the config does not give directly: Falcon's new decoder architecture caches every query head
  through 5.24 (models/falcon/modeling_falcon.py `FalconAttention._split_heads` broadcasts K and V before
  `layer_past.update`) and its num_kv_heads from 5.25 (K/V split per group, `repeat_kv` after the cache); the
  old multi-head layout caches every head, multi_query one. MPT is always multi-head (models/mpt/modeling_mpt.py
  ignores kv_n_heads). Releases are tabled in HF_RULES below.

- DeepSeek-V4 (models/deepseek_v4/modeling_deepseek_v4.py; `DynamicCache` builds each layer from its layer type,
  the cache classes registering themselves by `_layer_type`). Sliding layers: `DynamicSlidingWindowLayer`, K and V
  stored apart though equal (`DeepseekV4Attention.forward` calls `cache.update(kv, kv)`): 2 x (W - 1) rows.
  `DeepseekV4HCACache` (HCA, rate m): the window once (`update` sets values = keys), `compressed_kv`
  floor(T / m) x head_dim, and the partial window `buffer_kv` / `buffer_gate` (T mod m) x head_dim each
  (`store_compression_weights`). `DeepseekV4CSACache` (CSA): the same at 2 x head_dim per buffered token for the
  compressor and 2 x index_head_dim for the indexer, entries of head_dim + index_head_dim, and once T >= m the
  carried half window `overlap_kv` m x (head_dim + index_head_dim) plus `overlap_gate` the same in float32 (the
  gate plus the float32 `position_bias`, `_keep_in_fp32_modules_strict`; `update_overlap_state`).
  Activation dtype bf16 / fp32 only (fp16 upcasts the compressor's projections, `_keep_in_fp32_modules`).

Not counted: 0-dim int64 bookkeeping tensors (`DynamicSlidingWindowLayer._sliding_window_tensor`,
`StaticLayer.cumulative_length`, 5.25's `LinearAttentionLayer.cumulative_length_linear`), 8 bytes each per layer
whatever the batch or context. 5.25's `recurrent_states_history` holds states only while `record_past` is on
(`activate_past_recording`, for assisted decoding's rollback), which a plain generate() never turns on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from math import lcm, prod
from typing import Any

from kvsize.dtypes import KvDtype, dtype_from_torch_name
from kvsize.engines.base import Engine, UnsupportedArchitecture
from kvsize.errors import UsageError
from kvsize.sizing import KvEstimate
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateKind, StateSpec


@dataclass(frozen=True)
class HfRules:
    """What one range of transformers releases caches, where it changed (each field cites where it was read)."""

    since: tuple[int, int]
    mla_latent: bool
    """DeepSeek-style attention caches the compressed latent kv_lora_rank + qk_rope_head_dim (5.15+,
    models/deepseek_v3/modeling_deepseek_v3.py DeepseekV3Attention.forward), not per-head K and V."""
    falcon_grouped_kv: bool
    """Falcon's new decoder architecture caches its num_kv_heads K/V heads and repeats them only inside attention
    (5.25.0 models/falcon/modeling_falcon.py FalconAttention.forward -> layer_past.update, then repeat_kv in
    eager_attention_forward); through 5.24.0 `_split_heads` broadcast K and V to every query head first."""


RULE_GROUPED_FALCON = "5.25+"
RULE_LATENT = "5.15-5.24"
RULE_PER_HEAD = "<5.15"
HF_RULES: dict[str, HfRules] = {
    RULE_GROUPED_FALCON: HfRules(since=(5, 25), mla_latent=True, falcon_grouped_kv=True),
    RULE_LATENT: HfRules(since=(5, 15), mla_latent=True, falcon_grouped_kv=False),
    RULE_PER_HEAD: HfRules(since=(0, 0), mla_latent=False, falcon_grouped_kv=False),
}
"""Newest first. A rule is named by the releases it covers; each runs until the next one's first release."""
NEWEST_READ = (5, 25)
"""The newest transformers release whose cache code kvsize has read (5.25.0); a newer one gets the newest rule
with a note."""
LEGACY_RULE_NAMES = {"5.15+": RULE_LATENT}
"""Rule names kvsize once printed (before 5.25 split the latent rule): they keep their meaning."""

ACTIVATION_DTYPES = frozenset({KvDtype.FP32, KvDtype.FP16, KvDtype.BF16})
QUANTIZED_DTYPES = frozenset({KvDtype.FP8_E4M3})
RECURRENT_STATE_DTYPE = KvDtype.FP32
CACHE_IMPLEMENTATIONS = ("dynamic", "static")

# model_types whose configs only name custom code (`auto_map`): transformers has no class for them, and kvsize
# never runs remote code (transformers 5.24 CONFIG_MAPPING_NAMES lacks every one of these).
REMOTE_CODE_ONLY: dict[str, str] = {
    "phi-msft": "Microsoft's original phi-1.5 / phi-2 code (transformers' built-in class is model_type 'phi')",
    "nemotron-nas": "NVIDIA's DeciLM code for Nemotron-NAS (Llama-3.3-Nemotron-Super)",
    "chatglm": "THUDM's ChatGLM code (transformers' built-in classes are 'glm' / 'glm4')",
    "baichuan": "Baichuan's custom code",
    "internlm2": "InternLM2's custom code",
    "internlm": "InternLM's custom code (transformers' built-in class is 'internlm3')",
    "deepseek": "DeepSeek-MoE's custom code (transformers' built-in classes are 'deepseek_v2' / 'deepseek_v3')",
    "mimo": "Xiaomi's MiMo code",
    "minicpm": "OpenBMB's MiniCPM code",
    "yi": "the original Yi code (Yi-1.5 configs use model_type 'llama')",
}


# model_types whose transformers model keeps no KV cache at all: every generated token reruns the whole sequence.
NO_CACHE_MODEL_TYPES: dict[str, str] = {
    "openai-gpt": "transformers' GPT-1 (models/openai/modeling_openai.py OpenAIGPTModel) takes no past_key_values "
    "and returns no cache: each step recomputes the whole sequence",
}


# --- which transformers release --------------------------------------------------------------------------


def installed_transformers_version() -> str | None:
    """The installed transformers release, read from its metadata (no import of transformers), or None."""
    from importlib import metadata

    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def parse_release(text: str) -> tuple[int, int] | None:
    """(major, minor) of a release string such as '5.24.0', 'v4.57.6' or '5.15.0.dev0'; None if not one."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:[.\w+-]*)", text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def rule_for_release(release: tuple[int, int]) -> str:
    return next(name for name, rules in HF_RULES.items() if release >= rules.since)


def resolve_version(version: str | None) -> tuple[str, str | None, str]:
    """(rule, release, where the release came from) for an --engine-version value (None: the installed one)."""
    if version is None:
        installed = installed_transformers_version()
        parsed = parse_release(installed) if installed else None
        if installed is None or parsed is None:
            return RULE_GROUPED_FALCON, None, "transformers not installed: newest modelled rule"
        return rule_for_release(parsed), installed, "installed"
    text = version.strip()
    if text in HF_RULES:
        return text, None, "given"
    if text in LEGACY_RULE_NAMES:
        return LEGACY_RULE_NAMES[text], None, "given"
    parsed = parse_release(text)
    if parsed is None:
        raise UsageError(
            f"--engine-version '{version}' is not modelled for hf",
            hint=f"Give a transformers release (5.25.0, 4.57.6) or a rule: {', '.join(HF_RULES)}.",
        )
    return rule_for_release(parsed), text, "given"


# --- RAW-CONFIG HELPERS ----------------------------------------------------------------------------------
# Fields the hf engine needs that kvsize's ArchSpec may not carry (docs/verification.md, "Spec fields the hf
# engine needs"): MLA's qk_nope_head_dim / v_head_dim (taken from AttentionSpec when it has them, which current
# specs do; read here otherwise) and Falcon's new_decoder_architecture (no spec field yet). They are read from
# the config.json dict handed to the engine (`raw_config`: `kvsize verify` and the oracle pass it, the plain
# CLI does not, so there Falcon falls back to "more than one KV head means the new architecture").

_TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config", "decoder", "generator")


def raw_text_config(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a config dict (the same keys kvsize.config reads first)."""
    for key in _TEXT_CONFIG_KEYS:
        nested = raw.get(key)
        if isinstance(nested, Mapping):
            return nested
    return raw


def raw_mla_head_dims(raw: Mapping[str, Any]) -> tuple[int, int] | None:
    """(qk_nope_head_dim, v_head_dim) of an MLA config: what transformers < 5.15 caches per head besides the
    rope part. RAW-CONFIG HELPER: ArchSpec keeps only kv_lora_rank and qk_rope_head_dim."""
    text = raw_text_config(raw)
    nope, v_dim = text.get("qk_nope_head_dim"), text.get("v_head_dim")
    if isinstance(nope, int) and isinstance(v_dim, int) and not isinstance(nope, bool):
        return nope, v_dim
    return None


def raw_falcon_new_architecture(raw: Mapping[str, Any] | None) -> bool | None:
    """Falcon's `new_decoder_architecture` flag (None when no raw config is at hand). RAW-CONFIG HELPER."""
    if raw is None:
        return None
    return raw_text_config(raw).get("new_decoder_architecture") is True


# --- the engine -----------------------------------------------------------------------------------------


# Model types whose windowed layers transformers masks but caches in full (no layer_types for DynamicCache).
MASKED_WINDOW_MODEL_TYPES = frozenset({"gpt_neo"})


class HfEngine(Engine):
    name = "hf"
    title = "Hugging Face transformers"
    versions = tuple(HF_RULES)
    sized_state_kinds = frozenset(StateKind)  # hf_state_bytes: conv full kernel + recurrent state, per kind

    def __init__(
        self,
        version: str | None = None,
        *,
        cache_implementation: str = "dynamic",
        max_cache_len: int | None = None,
        raw_config: Mapping[str, Any] | None = None,
    ) -> None:
        rule, release, source = resolve_version(version)
        super().__init__(rule)
        self.release = release
        self.release_source = source
        self.rules = HF_RULES[rule]
        parsed = parse_release(release) if release else None
        if parsed is not None and parsed > NEWEST_READ:
            self.release_note = (
                f"transformers {release} is newer than the newest release kvsize has read "
                f"({'.'.join(map(str, NEWEST_READ))}); sized with the rules of {rule}"
            )
        if cache_implementation not in CACHE_IMPLEMENTATIONS:
            raise UsageError(
                f"cache implementation '{cache_implementation}' is not modelled for hf",
                hint=f"Choose one of: {', '.join(CACHE_IMPLEMENTATIONS)} (--kv-dtype fp8 selects the fp8 "
                "QuantizedCache).",
            )
        if max_cache_len is not None and max_cache_len < 1:
            raise UsageError(f"max_cache_len must be positive, got {max_cache_len}")
        self.cache_implementation = cache_implementation
        self.max_cache_len = max_cache_len
        self.raw_config = raw_config

    @property
    def static(self) -> bool:
        return self.cache_implementation == "static"

    @property
    def rule(self) -> str:
        release = f"transformers {self.release} ({self.release_source})" if self.release else self.release_source
        mla = (
            "MLA caches the latent kv_lora_rank + qk_rope_head_dim (DSA: + the indexer key, index_head_dim)"
            if self.rules.mla_latent
            else "MLA caches per-head K (qk_nope+qk_rope) and V (v_head_dim) for every query head"
        )
        if self.static:
            window = (
                f"StaticCache(max_cache_len={self.max_cache_len or 'ctx'}): full layers max_cache_len, "
                "sliding min(W, max_cache_len)"
            )
        else:
            window = "DynamicCache: full layers ctx, sliding/chunked min(ctx, W-1)"
        return (
            f"{release}, rule {self.version}: {window}; {mla}; un-repeated KV heads in the activation dtype; "
            "conv state full kernel (activation dtype), recurrent state fp32; shared/MoE-only layers nothing "
            "(transformers/cache_utils.py DynamicLayer, DynamicSlidingWindowLayer, StaticLayer, LinearAttentionLayer)"
        )

    # --- what transformers can run --------------------------------------------------------------------

    def auto_kv_dtype(self, spec: ArchSpec, chosen: KvDtype) -> KvDtype:
        """`auto` is the model's dtype: transformers 5.25 reads a config's kv_cache_scheme only into
        CompressedTensorsConfig (utils/quantization_config.py), and generate() builds a DynamicCache in the
        activation dtype; an fp8 cache is QuantizedCache(backend="fp8"), which --kv-dtype fp8 selects."""
        if chosen is KvDtype.FP8_E4M3:
            return dtype_from_torch_name(spec.model_dtype) or KvDtype.BF16
        return chosen

    def auto_kv_reason(self, spec: ArchSpec, chosen: KvDtype) -> str:
        return "transformers caches in the activation dtype; the config's fp8 KV scheme is for serving engines"

    def check_serves(self, spec: ArchSpec) -> None:
        reason = REMOTE_CODE_ONLY.get(spec.model_type)
        if reason is not None:
            raise UnsupportedArchitecture(
                f"transformers has no built-in class for model_type '{spec.model_type}': only {reason}, and kvsize "
                "never runs remote code",
                hint="Size it with --engine vllm or --engine formula.",
            )
        if spec.model_type == "mimo_v2_flash":
            self._check_mimo(spec)
        if not self.rules.mla_latent and _indexed(spec):
            raise UnsupportedArchitecture(
                "kvsize has read transformers' DeepSeek sparse attention cache (DynamicIndexedLayer) in 5.24 only, "
                "not under the <5.15 per-head MLA rule",
                hint="Use --engine-version 5.24.0 (the release kvsize read).",
            )
        if not self.rules.mla_latent and any(
            self._mla_dims(layer.attention) is None
            for layer, _ in spec.layer_groups()
            if layer.attention is not None and layer.attention.kind is AttentionKind.MLA
        ):
            raise UnsupportedArchitecture(
                "the <5.15 MLA rule needs qk_nope_head_dim and v_head_dim, which kvsize's spec does not carry yet",
                hint="Use `kvsize verify` (which passes the config), or the Python API with "
                "engine_options={'raw_config': config}.",
            )

    @staticmethod
    def _check_mimo(spec: ArchSpec) -> None:
        """transformers 5.24 builds MiMo-V2-Flash from fixed rules, not from the hub's swa_* fields or
        hybrid_layer_pattern: full attention at layer 0 and every 6th layer (MiMoV2FlashConfig.__post_init__),
        sliding layers with 2 x num_key_value_heads and the full layers' head sizes (MiMoV2FlashAttention.__init__).
        A config that says otherwise builds another model there (its checkpoint would not load): refused."""
        kinds = [layer.attention.kind if layer.attention else None for layer in spec.layers]
        slides = [i != 0 and (i + 1) % 6 != 0 for i in range(len(kinds))]
        expected = [AttentionKind.SLIDING if s else AttentionKind.FULL for s in slides]
        shapes = {
            a.kind: (a.num_kv_heads, a.head_dim, a.head_dim_v)
            for layer, _ in spec.layer_groups()
            if (a := layer.attention) is not None
        }
        full, sliding = shapes.get(AttentionKind.FULL), shapes.get(AttentionKind.SLIDING)
        fits = kinds == expected and full is not None and sliding in (None, (2 * full[0], full[1], full[2]))
        if not fits:
            raise UnsupportedArchitecture(
                "transformers 5.24 builds MiMo-V2-Flash with full attention at layer 0 and every 6th layer and "
                "2 x num_key_value_heads of the same head sizes on the sliding layers (modeling_mimo_v2_flash.py "
                "MiMoV2FlashAttention); this config's layers differ, so transformers would build another model",
                hint="Size it with --engine formula (the config's own layout).",
            )

    def check_scenario(self, spec: ArchSpec, *, ctx: int, kv_dtype: KvDtype, tp: int) -> None:
        """Raise for settings transformers' caches cannot have: tensor parallelism, dtypes it has no cache for,
        a static cache shorter than the context."""
        if spec.model_type == "deepseek_v4":
            self._check_deepseek_v4(kv_dtype)
        if tp != 1:
            raise UsageError(
                f"--engine hf models a single process; --tp {tp} is not modelled",
                hint="transformers' tp_plan splits KV heads per rank, which kvsize does not verify yet: use --tp 1.",
            )
        if kv_dtype in QUANTIZED_DTYPES:
            self._check_quantized(spec)
        elif kv_dtype not in ACTIVATION_DTYPES:
            raise UsageError(
                f"transformers has no {kv_dtype.value} KV cache",
                hint="The hf cache stores the activation dtype (fp32, fp16, bf16), or fp8_e4m3 with "
                "QuantizedCache(backend='fp8').",
            )
        if self.static and self.max_cache_len is not None and self.max_cache_len < ctx:
            raise UsageError(f"a StaticCache of max_cache_len {self.max_cache_len} cannot hold ctx {ctx}")

    def _check_deepseek_v4(self, kv_dtype: KvDtype) -> None:
        if self.static:
            raise UnsupportedArchitecture(
                "transformers 5.24 has no static cache for DeepSeek-V4: its compressor state lives on "
                "DeepseekV4CSACache / DeepseekV4HCACache, dynamic only (modeling_deepseek_v4.py)",
                hint="Drop the static cache implementation.",
            )
        if kv_dtype is KvDtype.FP16:
            raise UnsupportedArchitecture(
                "transformers 5.24 loads DeepSeek-V4's compressor projections in float32 at fp16 "
                "(_keep_in_fp32_modules), a cache kvsize has not checked",
                hint="Use --kv-dtype bf16 or fp32.",
            )

    def _check_quantized(self, spec: ArchSpec) -> None:
        if self.static:
            raise UsageError("fp8 selects QuantizedCache, which is dynamic: drop the static cache implementation")
        kinds = {layer.kind for layer, _ in spec.layer_groups()}
        if _indexed(spec):
            raise UnsupportedArchitecture(
                "transformers' QuantizedCache (fp8) only takes models whose layers are all full attention; "
                "DeepSeek sparse attention layers are indexed_attention (cache_utils.py QuantizedCache.__init__)",
                hint="Use --kv-dtype bf16 (the activation dtype).",
            )
        if kinds - {AttentionKind.FULL.value, AttentionKind.MLA.value}:
            raise UnsupportedArchitecture(
                "transformers' QuantizedCache (fp8) only takes models whose layers are all full attention; this "
                f"model has {', '.join(sorted(kinds))} layers (cache_utils.py QuantizedCache.__init__)"
            )

    def estimate(
        self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> KvEstimate:
        self.check_scenario(spec, ctx=ctx, kv_dtype=kv_dtype, tp=tp)
        return super().estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)

    # --- per layer ------------------------------------------------------------------------------------

    def _mla_dims(self, attn: AttentionSpec) -> tuple[int, int] | None:
        """(qk_nope_head_dim, v_head_dim): from the spec when it carries them, else from the raw config."""
        nope, v_dim = getattr(attn, "qk_nope_head_dim", None), getattr(attn, "v_head_dim", None)
        if isinstance(nope, int) and isinstance(v_dim, int):
            return nope, v_dim
        return raw_mla_head_dims(self.raw_config) if self.raw_config is not None else None

    def cached_kv_heads(self, spec: ArchSpec, attn: AttentionSpec) -> int:
        """KV heads transformers stores for a non-MLA layer: the config's KV heads, except Falcon (all query heads
        for the new decoder architecture through 5.24 and for the old multi-head layout) and MPT (multi-head)."""
        heads = spec.num_attention_heads or attn.num_kv_heads
        if spec.model_type == "mpt":
            return heads
        if spec.model_type == "falcon":
            new_arch = raw_falcon_new_architecture(self.raw_config)
            if new_arch is None:  # no raw config: more than one KV head means the new architecture
                new_arch = attn.num_kv_heads != 1
            if new_arch and not self.rules.falcon_grouped_kv:
                return heads
            if new_arch is False and attn.num_kv_heads != 1:  # the old multi-head layout: one K/V per query head
                return heads
        return attn.num_kv_heads

    def attention_bytes(self, spec: ArchSpec, attn: AttentionSpec, dtype: KvDtype) -> int:
        """Bytes one cached token costs in one layer (K and V of every cached head)."""
        if attn.kind is AttentionKind.SHARED:
            return 0
        if attn.kind is AttentionKind.MLA and not self.rules.mla_latent:
            dims = self._mla_dims(attn)
            heads = getattr(attn, "num_query_heads", None) or spec.num_attention_heads
            if dims is None or attn.qk_rope_head_dim is None or heads is None:
                raise UnsupportedArchitecture("the <5.15 MLA rule needs qk_nope_head_dim and v_head_dim")
            nope, v_dim = dims
            return heads * (self.row_bytes(nope + attn.qk_rope_head_dim, dtype) + self.row_bytes(v_dim, dtype))
        heads = 1 if attn.kind is AttentionKind.MLA else self.cached_kv_heads(spec, attn)
        if attn.kind is AttentionKind.MLA and attn.index_head_dim:
            # DynamicIndexedLayer / StaticIndexedLayer (layer type indexed_attention): the latent plus the DSA
            # indexer's key [B, S, index_head_dim] in the activation dtype (DeepseekV32Indexer.forward); none on
            # a GLM-5.2 layer that shares a top-k (GlmMoeDsaAttention: indexer None, indexer_keys never set).
            return self.row_bytes(attn.head_dim, dtype) + self.row_bytes(attn.own_indexer_dim, dtype)
        if spec.model_type == "deepseek_v4" and attn.kind is AttentionKind.SLIDING:
            return 2 * heads * self.row_bytes(attn.head_dim, dtype)  # K = V, but two tensors
        # MiniMax-M3's sparse layers also keep idx_keys [B, 1, S, index_head_dim] (MiniMaxM3VLSparseCacheLayer)
        indexer = self.row_bytes(attn.own_indexer_dim, dtype)
        return heads * (self.row_bytes(attn.head_dim, dtype) + self.row_bytes(attn.head_dim_v, dtype)) + indexer

    def cache_len(self, ctx: int) -> int:
        """Token slots of a full StaticLayer (max_cache_len; generate() sets it to the generation length)."""
        return self.max_cache_len or ctx

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        if attn.kind is AttentionKind.SHARED:
            return 0
        if attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.COMPRESSED):
            assert attn.window is not None
            if self.static:
                return min(attn.window, self.cache_len(ctx))
            return min(ctx, attn.window - 1) if attn.window > 1 else ctx
        if self.static:
            return self.cache_len(ctx)  # cross layers too: a StaticLayer sized max_cache_len
        if attn.kind is AttentionKind.CROSS:
            assert attn.encoder_tokens is not None
            return attn.encoder_tokens
        return ctx

    def hf_state_bytes(self, state: StateSpec, dtype: KvDtype) -> int:
        """Conv state `[conv_channels, conv_kernel]` in the activation dtype plus the recurrent state in fp32.
        MiniMax lightning layers keep only their K^T V state, in the activation dtype (MiniMaxCache.linear_cache;
        models/minimax/modeling_minimax.py, checked with `kvsize verify` on CPU)."""
        if state.kind is StateKind.LIGHTNING:
            return self.row_bytes(prod(state.ssm_shape), dtype)
        if state.kind is StateKind.RG_LRU:
            # RecurrentGemmaRecurrentBlock: conv1d_state keeps conv1d_width - 1 inputs in the activation dtype,
            # rg_lru.recurrent_states (batch, lru_width) in float32 (modeling_recurrent_gemma.py, 5.24).
            conv = self.row_bytes(state.conv_elements, dtype)
            return conv + self.row_bytes(state.ssm_elements, RECURRENT_STATE_DTYPE)
        # KDA: one conv state over q, k and v together (models/kimi_linear/modeling_kimi_linear.py
        # KimiLinearDeltaAttention.forward, conv_dim = 3 x heads x head_dim) and the fp32 delta-rule matrix;
        # LFM2: the conv state alone (models/lfm2/modeling_lfm2.py Lfm2ShortConv: get_conv_state only).
        conv = self.row_bytes(state.conv_channels * state.conv_kernel, dtype)
        return conv + self.row_bytes(state.ssm_elements, RECURRENT_STATE_DTYPE)

    def layer_request_bytes(
        self, spec: ArchSpec, layer: LayerSpec, ctx: int, dtype: KvDtype, tp: int
    ) -> tuple[int, int, int]:
        per_token = tokens = state = 0
        if spec.model_type in NO_CACHE_MODEL_TYPES:
            return 0, 0, 0
        if layer.attention is not None and layer.attention.kind is AttentionKind.COMPRESSED:
            attn = layer.attention
            return (
                self.attention_bytes(spec, attn, dtype),
                self.tokens_allocated(attn, ctx),
                self.compressor_bytes(attn, ctx, dtype),
            )
        if layer.attention is not None:
            per_token = self.attention_bytes(spec, layer.attention, dtype)
            tokens = self.tokens_allocated(layer.attention, ctx) if per_token else 0
            if spec.model_type in MASKED_WINDOW_MODEL_TYPES and layer.attention.kind is AttentionKind.SLIDING:
                # GPT-Neo's local layers only mask (modeling_gpt_neo.py): GPTNeoConfig has no layer_types, so
                # DynamicCache(config=...) gives every layer a full DynamicLayer that keeps every token
                tokens = self.cache_len(ctx) if self.static else ctx
        if layer.state is not None:
            state = self.hf_state_bytes(layer.state, dtype)
        return per_token, tokens, state

    def compressor_bytes(self, attn: AttentionSpec, ctx: int, dtype: KvDtype) -> int:
        """A DeepSeek-V4 layer's compressor state after `ctx` tokens, one request: floor(ctx / m) entries, the
        (ctx mod m) buffered tokens' kv and gate projections, and on CSA layers the carried half window
        (DeepseekV4HCACache / DeepseekV4CSACache, modeling_deepseek_v4.py)."""
        assert attn.compress_ratio is not None
        m, wide = attn.compress_ratio, 2 if attn.compress_overlap else 1
        dims = attn.head_dim + (attn.index_head_dim or 0)  # the compressor's and the indexer's widths
        total = ctx // m * self.row_bytes(dims, dtype)  # compressed_kv
        total += ctx % m * 2 * self.row_bytes(wide * dims, dtype)  # buffer_kv and buffer_gate
        if attn.compress_overlap and ctx >= m:  # overlap_kv (activation dtype) and overlap_gate (float32)
            total += m * (self.row_bytes(dims, dtype) + self.row_bytes(dims, KvDtype.FP32))
        return total

    def peak_request_bytes(self, spec: ArchSpec, ctx: int, kv_dtype: KvDtype, pp: int = 1) -> int | None:
        """The most one request's cache holds on the busiest stage at any length up to `ctx`, where that can be
        more than at `ctx`: a DeepSeek-V4 compressed layer's buffer drains into one entry at every m-th token
        (compressor_bytes), so the bytes fall there. Each layer's bytes at t + L (L the lcm of the ratios)
        are at least those at t, so the most lies in the last L lengths; there the bytes only grow between
        drains, so the most is at `ctx` or just before a drain (t + 1 a multiple of a ratio). None: no layer
        whose bytes fall."""
        ratios = {
            layer.attention.compress_ratio
            for layer in spec.layers
            if layer.attention is not None and layer.attention.compress_ratio
        }
        if not ratios or ctx < min(ratios):
            return None
        span = lcm(*ratios)
        lengths = {ctx} | {n for n in range(max(1, ctx - span + 1), ctx) if any((n + 1) % m == 0 for m in ratios)}
        stages = self.stages(spec.num_layers, pp)
        most = 0
        for n in lengths:
            layers = self.layer_bytes(spec, ctx=n, batch=1, kv_dtype=kv_dtype)
            most = max(most, max(sum(layers[i] for i in stage) for stage in stages))
        return most

    def layer_bytes(self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype) -> list[int]:
        """Predicted cache bytes of every decoder layer, in order, for `batch` requests of `ctx` tokens."""
        self.check_supported(spec)
        self.check_scenario(spec, ctx=ctx, kv_dtype=kv_dtype, tp=1)
        if spec.model_type in NO_CACHE_MODEL_TYPES:
            return []  # no cache object, so no cache layers
        out = []
        for layer in spec.layers:
            per_token, tokens, state = self.layer_request_bytes(spec, layer, ctx, kv_dtype, 1)
            out.append(batch * (per_token * tokens + state))
        return out

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        notes = []
        no_cache = NO_CACHE_MODEL_TYPES.get(spec.model_type)
        if no_cache is not None:
            notes.append(f"hf: no KV cache: {no_cache}")
        if spec.has_state:
            notes.append(
                "hf: recurrent states are float32 and conv states keep the full kernel (torch paths of "
                "transformers' Mamba / Mamba2 / GatedDeltaNet mixers)"
            )
        # Whole-model tests over the distinct layers (spec.layer_groups): the same answer for 100,000 layers.
        groups = spec.layer_groups()
        if any(layer.attention is not None and layer.attention.kind is AttentionKind.CROSS for layer, _ in groups):
            notes.append("hf: cross-attention layers hold the image tokens only once a forward has seen an image")
        if not self.static and any(
            layer.attention is not None and layer.attention.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED)
            for layer, _ in groups
        ):
            notes.append(
                "hf: sliding/chunked layers keep W-1 tokens between forwards (the full window only inside one)"
            )
        if spec.model_type == "deepseek_v4":
            notes.append(
                "hf: DeepSeek-V4 compressed layers keep W-1 raw tokens (K = V, one tensor), floor(ctx / m) "
                "compressed entries and the compressor's buffers (ctx mod m tokens; CSA: the carried half window, "
                "its gate in float32), counted as the layer's state at this context; sliding layers store K and V "
                "apart"
            )
        if any(
            self.cached_kv_heads(spec, a) > a.num_kv_heads
            for layer, _ in groups
            if (a := layer.attention) is not None and a.kind is not AttentionKind.MLA
        ):
            notes.append(f"hf: {spec.model_type} caches one K/V head per query head in transformers")
        return tuple(notes)

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    def prefix_sharing_rule(self) -> str:
        return (
            "transformers keeps one cache per generate() call (DynamicCache / StaticCache) and does not share a "
            "common prefix: every request stores it"
        )


def _indexed(spec: ArchSpec) -> bool:
    """DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): MLA layers that also cache indexer keys."""
    attns = (layer.attention for layer, _ in spec.layer_groups())
    return any(a is not None and a.kind is AttentionKind.MLA and a.index_head_dim for a in attns)
