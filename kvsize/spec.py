"""The architecture spec: what every decoder layer keeps per token and per request.

A spec is built by `kvsize.config.parse_config` from a config.json and consumed by the sizing engines.
It knows nothing of Hugging Face key names; those live in `config.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from math import prod

import msgspec

from kvsize.record import InvalidRecord, Record, check_at_least
from kvsize.text import shown


class AttentionKind(str, Enum):
    FULL = "full"  # K and V for every token of the context
    SLIDING = "sliding"  # K and V for the last `window` tokens
    CHUNKED = "chunked"  # K and V for the current chunk of `window` tokens (Llama 4 local layers)
    MLA = "mla"  # one compressed latent per token (DeepSeek-V2/V3 multi-head latent attention)
    CROSS = "cross"  # K and V of the encoder's (or vision tower's) tokens, fixed per request
    SHARED = "shared"  # reads another layer's cache and stores nothing itself
    COMPRESSED = "compressed"  # DeepSeek-V4 CSA / HCA: a window of raw tokens plus one entry per compress_ratio


class StateKind(str, Enum):
    MAMBA = "mamba"  # Mamba-1 selective SSM
    MAMBA2 = "mamba2"  # Mamba-2 SSD
    GATED_DELTANET = "gated_deltanet"  # Qwen3-Next linear attention
    LIGHTNING = "lightning"  # MiniMax-Text-01 / M1 lightning (linear) attention: one K^T V matrix per head
    KDA = "kda"  # Kimi delta attention (Kimi Linear): a conv over q, k, v and one head_dim^2 matrix per head
    SHORT_CONV = "short_conv"  # LFM2 gated short convolution: a conv state only, no recurrent matrix
    RG_LRU = "rg_lru"  # RecurrentGemma (Griffin) recurrent block: a conv1d state and one lru_width vector


class AttentionSpec(Record, frozen=True, kw_only=True):
    """The attention cache of one layer."""

    kind: AttentionKind
    num_kv_heads: int
    """KV heads stored (1 for MLA's single latent, 0 for a shared layer)."""
    head_dim: int
    """Elements of K per head (MLA: kv_lora_rank + qk_rope_head_dim)."""
    head_dim_v: int
    """Elements of V per head (0 for MLA, whose latent serves both)."""
    window: int | None = None
    """Tokens held by a sliding-window layer, or the chunk size of a chunked layer."""
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    """MLA only: per-head K width without RoPE (engines that cache decompressed heads need it)."""
    v_head_dim: int | None = None
    """MLA only: per-head V width after decompression."""
    num_query_heads: int | None = None
    """MLA only: attention heads the latent is decompressed into."""
    encoder_tokens: int | None = None
    """Tokens a cross-attention layer attends to, per request (an image's or an encoder's)."""
    shares_kv_with: int | None = None
    """Index of the layer whose cache a SHARED layer reads."""
    index_head_dim: int | None = None
    """MLA with a sparse-attention indexer (DeepSeek-V3.2 `index_head_dim`): the indexer keeps one key of
    this width per token beside the latent (FULL: MiniMax-M3's, beside K and V). COMPRESSED (DeepSeek-V4
    CSA): one indexer key of this width per compressed entry."""
    index_shared: bool = False
    """MLA with DSA only: the layer reuses an earlier layer's top-k selection (GLM-5.2 `indexer_types`
    "shared") and runs no indexer of its own, so transformers 5.24 and vLLM 0.24+ cache no indexer key there
    (`index_head_dim` still names the model's indexer width; engines that key every layer read it)."""
    compress_ratio: int | None = None
    """COMPRESSED only: source tokens pooled into one compressed entry of head_dim elements (CSA 4, HCA 128);
    the layer also keeps its last `window` raw tokens (K = V: head_dim_v 0)."""
    compress_overlap: bool = False
    """COMPRESSED only: entries pool two overlapping windows (DeepSeek-V4 CSA), so the compressor keeps the last
    window's first half between forwards, and its projections are 2 x wide."""

    def __post_init__(self) -> None:
        check_at_least(self, 0, "num_kv_heads", "head_dim", "head_dim_v", "qk_rope_head_dim", "qk_nope_head_dim")
        check_at_least(self, 0, "v_head_dim", "encoder_tokens", "shares_kv_with")
        check_at_least(self, 1, "window", "kv_lora_rank", "num_query_heads", "index_head_dim", "compress_ratio")
        if self.kind is AttentionKind.COMPRESSED and (self.window is None or self.compress_ratio is None):
            raise InvalidRecord("compressed attention needs a window and a compress_ratio")
        if self.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED) and self.window is None:
            raise InvalidRecord(f"{self.kind.value} attention needs a window")
        if self.kind is AttentionKind.CROSS and self.encoder_tokens is None:
            raise InvalidRecord("cross attention needs encoder_tokens")
        if self.index_shared and (self.kind is not AttentionKind.MLA or self.index_head_dim is None):
            raise InvalidRecord("only an MLA layer with an indexer can share its indexer's selection")
        if self.kind is not AttentionKind.SHARED and self.num_kv_heads * (self.head_dim + self.head_dim_v) == 0:
            raise InvalidRecord(f"{self.kind.value} attention stores no elements")

    @property
    def own_indexer_dim(self) -> int:
        """The indexer key a layer keeps per token: DSA's on an MLA layer (none where it shares a top-k:
        transformers, vLLM 0.24+) or MiniMax-M3's on a full-attention layer; 0 without an indexer (a COMPRESSED
        layer keys its entries, not its tokens)."""
        if self.kind not in (AttentionKind.MLA, AttentionKind.FULL) or self.index_shared:
            return 0
        return self.index_head_dim or 0

    @property
    def elements_per_token(self) -> int:
        """Elements stored per cached token (K and V together, all KV heads of the layer)."""
        return self.num_kv_heads * (self.head_dim + self.head_dim_v)


class StateSpec(Record, frozen=True, kw_only=True):
    """A recurrent layer's fixed-size state: the same bytes per request at any context length."""

    kind: StateKind
    conv_channels: int
    """Channels of the short causal convolution whose last inputs are kept."""
    conv_kernel: int
    """Convolution width; a cache keeps the last `conv_kernel - 1` inputs (some engines keep `conv_kernel`)."""
    ssm_shape: tuple[int, ...]
    """Shape of the recurrent (SSM / delta-rule) state tensor per request; empty for SHORT_CONV, which has none."""
    dtype: str = "bf16"
    """Storage format of the state (a `KvDtype` value); engines may override it."""
    n_groups: int | None = None
    """Mamba-2: groups of the B and C projections (their channels are in `conv_channels`); engines that
    shard by tensor parallelism replicate groups that do not divide (vLLM extra_groups_for_head_shards)."""
    chunk_size: int | None = None
    """Mamba-2 SSD chunk size the config names (`mamba_chunk_size`, `chunk_size`); None when it names none."""
    ssm_dtype: str | None = None
    """The SSM-state dtype the config names (`mamba_ssm_dtype`, `mamba_ssm_cache_dtype`), as a torch name;
    None when it names none. Engines decide whether they follow it."""

    def __post_init__(self) -> None:
        check_at_least(self, 1, "conv_channels", "conv_kernel", "n_groups", "chunk_size")
        if self.kind is StateKind.SHORT_CONV and self.ssm_shape == ():
            return
        if not self.ssm_shape or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in self.ssm_shape
        ):
            raise InvalidRecord(f"StateSpec.ssm_shape must be one or more integers > 0, got {shown(self.ssm_shape)}")

    @property
    def conv_elements(self) -> int:
        return self.conv_channels * (self.conv_kernel - 1)

    @property
    def ssm_elements(self) -> int:
        return prod(self.ssm_shape) if self.ssm_shape else 0


class LayerSpec(msgspec.Struct, frozen=True):
    """One decoder layer: an attention cache, a recurrent state, both (Zamba2 hybrid blocks) or neither.

    A config may have 100,000 layers: the layers of one kind share their (checked) `AttentionSpec` /
    `StateSpec` objects, so only the index is per layer.
    """

    index: int
    attention: AttentionSpec | None = None
    state: StateSpec | None = None
    cross: AttentionSpec | None = None
    """Encoder-decoder models: the decoder layer's cross-attention over the encoder's tokens."""

    def __post_init__(self) -> None:
        if not isinstance(self.index, int) or self.index < 0:
            raise InvalidRecord(f"a layer index is >= 0, got {self.index}")

    def renumbered(self, index: int) -> LayerSpec:
        """The same layer at another index (the caches are shared, not copied)."""
        return LayerSpec(index, self.attention, self.state, self.cross)

    @property
    def kind(self) -> str:
        if self.attention is not None and self.attention.kind is AttentionKind.COMPRESSED:
            return f"compressed/{self.attention.compress_ratio}"  # CSA and HCA layers apart
        if self.attention is not None and self.cross is not None:
            return f"{self.attention.kind.value}+cross"
        if self.attention is not None and self.state is not None:
            return f"{self.state.kind.value}+{self.attention.kind.value}"
        if self.attention is not None:
            return self.attention.kind.value
        if self.state is not None:
            return self.state.kind.value
        return "none"


class RopeScaling(Record, frozen=True, kw_only=True):
    """One RoPE scaling entry of a config (`rope_scaling`, or `rope_parameters`, one per layer type when
    nested): engines scale the model's maximum context by `factor` for some types (kvsize/fit.py
    context_limit)."""

    rope_type: str
    """`rope_type`, else the legacy `type`; "default" when the entry names neither."""
    factor: tuple[int, int] | None = None
    """The config's `factor` as an exact ratio (numerator, denominator) of its binary float: 1.5 -> (3, 2);
    a spec holds no floats."""
    has_original_max: bool = False
    """The entry states `original_max_position_embeddings` (SGLang then leaves the maximum unscaled)."""
    original_max: int | None = None
    """Its `original_max_position_embeddings` (vLLM before 0.30 scales that one by `factor` for YaRN)."""
    mrope: bool = False
    """The entry has an `mrope_section` (multimodal RoPE: vLLM sizes its table for 4x the positions)."""


class RopeTable(Record, frozen=True, kw_only=True):
    """What sizes the rotary embedding's cos/sin tables that vLLM and SGLang precompute at load, one per distinct
    RoPE the model builds (kvsize/rope_tables.py): positions x rotary_dim elements each, on every rank."""

    max_position: int
    """The `max_position_embeddings` the model files pass to get_rope."""
    rotary_dim: int
    """Rotated width of a head: head_dim x partial_rotary_factor (or `rotary_dim`, `rotary_pct`; MLA:
    qk_rope_head_dim)."""
    local_table: bool = False
    """A second, unscaled table for the local layers (Gemma 3's `rope_local_base_freq`)."""
    per_layer_type: bool = False
    """The config nests its RoPE per layer type (transformers 5 `rope_parameters: {full_attention: ...,
    sliding_attention: ...}`): one table per entry, the local one among them."""
    original_max: int | None = None
    """The config's top-level `original_max_position_embeddings` (Phi-3's longrope keeps it outside rope_scaling;
    vLLM's config patching moves it in)."""
    mla: bool = False
    """The rotated part of an MLA head (`qk_rope_head_dim`): vLLM's DeepSeek models build a scaled RoPE as
    DeepseekScalingRotaryEmbedding."""


class VisionDummy(Record, frozen=True, kw_only=True):
    """The largest item a multimodal model's processor makes, as vLLM's profile run feeds it to the encoder
    (kvsize/mm_profile.py vision_dummy)."""

    family: str
    """The model family and the rule its vLLM file gives (shown in the budget's rule)."""
    tokens_per_item: int
    """Embeddings one item puts in the prompt (get_mm_max_tokens_per_item)."""
    input_elements: int
    """The processor's output for one item (pixel values), elements."""
    tower_tokens: int
    """Tokens one item passes through the vision tower (patches, class tokens, tiles)."""
    tower_hidden: int
    tower_intermediate: int
    output_width: int
    """Width of each embedding the encoder returns (the language model's hidden size)."""
    tower_hidden_factor: int = 2
    tower_intermediate_factor: int = 2
    """The tower's peak per token is hidden_factor x hidden + intermediate_factor x intermediate / tp elements: the
    tensors live in its MLP step (2 and 2 for a plain fc1-act-fc2 MLP; kvsize/mm_profile.py for the others)."""
    tower_kept_per_token: int = 0
    """Elements per tower token held to the end of the forward besides (Qwen3-VL's deepstack features)."""
    video: str | None = None
    """The release-dependent video dummy of the family (kvsize/mm_profile.py qwen_vl_item): "qwen2_vl",
    "qwen3_vl"; None: the item above is the dummy at every release."""
    patch_size: int = 0
    temporal_patch_size: int = 0
    """The tower's patch (pixels) and temporal patch (frames), for the video dummies (0: not used)."""

    def __post_init__(self) -> None:
        check_at_least(
            self, 1, "tokens_per_item", "input_elements", "tower_tokens", "tower_hidden", "tower_intermediate"
        )
        check_at_least(self, 1, "output_width", "tower_hidden_factor", "tower_intermediate_factor")
        check_at_least(self, 0, "tower_kept_per_token", "patch_size", "temporal_patch_size")


class ArchSpec(Record, frozen=True, kw_only=True, dict=True):  # dict=True: room for the cached layer groups
    """A model's decoder as kvsize sizes it."""

    model_type: str
    layers: tuple[LayerSpec, ...]
    num_attention_heads: int | None = None
    """Query heads of the attention layers (to tell MHA, GQA and MQA apart)."""
    max_context: int | None = None
    """The model's maximum context (max_position_embeddings or its equivalent)."""
    model_dtype: str = "bf16"
    """The weights' dtype from the config (`torch_dtype`), used by `--kv-dtype auto`."""
    hidden_size: int | None = None
    intermediate_size: int | None = None
    """Dense MLP width (MoE models: the shared/dense width where the config gives one)."""
    vocab_size: int | None = None
    experts_per_token: int | None = None
    """MoE models: experts each token is routed to (num_experts_per_tok / top_k), for the profile run's
    fused-MoE workspace."""
    moe_intermediate_size: int | None = None
    """MoE models: one expert's MLP width (moe_intermediate_size, or intermediate_size for Mixtral-style configs)."""
    notes: tuple[str, ...] = ()
    """Assumptions and interpretations made while parsing (shown in the table and the JSON)."""
    is_encoder_decoder: bool = False
    """The layers are the decoder's; each also holds cross-attention K/V of the encoder's output."""
    architectures: tuple[str, ...] = ()
    """The config's `architectures` (engines key some rules on the class name, e.g. SGLang's hybrid SWA list)."""
    declares_hybrid_swa: bool = False
    """The config sets `is_hybrid_swa: true` (SGLang gives such models a separate sliding-window pool)."""
    lists_layer_types: bool = False
    """The config.json lists `layer_types` itself (not the class's generated pattern): vLLM then gives a model
    with mixed types no global window whatever transformers release it runs (VllmRules.qwen2_moe_windows)."""
    is_multimodal: bool = False
    """The config carries a `vision_config` (a vision-language model)."""
    vision_layers: int | None = None
    """Layers of the vision tower (`vision_config.num_hidden_layers`), for multimodal memory reserves."""
    vision_hidden_size: int | None = None
    """Width of the vision tower (`vision_config.hidden_size`)."""
    vision_dummy: VisionDummy | None = None
    """vLLM's profile-run item for the encoder (None: not a multimodal family kvsize models)."""
    rope_scaling: tuple[RopeScaling, ...] = ()
    """The config's RoPE scaling entries (none: unscaled), for the engines' maximum context."""
    rope_table: RopeTable | None = None
    """The rotary embedding's precomputed tables (None: the config states no RoPE), kvsize/rope_tables.py."""
    tied_embeddings: bool = False
    """`tie_word_embeddings`: the output head reuses the input embedding (one copy unless pipeline stages split
    them)."""
    mxfp4_experts: int | None = None
    """Experts per MoE layer of a checkpoint whose experts are MXFP4 (quantization_config.quant_method "mxfp4",
    gpt-oss), which vLLM pads when it loads them (kvsize/budget.py vllm_mxfp4_padding); None otherwise."""
    context_lengths: tuple[tuple[str, int], ...] = ()
    """Every context-length key the language model's config states, with its value (max_position_embeddings,
    n_positions, seq_length, model_max_length, ...): engines read different keys and `max_context` is the
    first of them (kvsize.fit engine_max_context)."""

    def __post_init__(self) -> None:
        if not self.layers:
            raise InvalidRecord("ArchSpec.layers must hold at least one layer")
        check_at_least(self, 1, "num_attention_heads", "max_context", "hidden_size", "intermediate_size")
        check_at_least(self, 1, "vocab_size", "experts_per_token", "moe_intermediate_size", "mxfp4_experts")
        check_at_least(self, 1, "vision_layers", "vision_hidden_size")

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def attention_label(self) -> str:
        """MHA, GQA, MQA, MLA, hybrid (attention and recurrent layers) or SSM (no attention at all)."""
        groups = self._groups  # the same answer as over every layer, at the cost of one per kind
        attn = [layer.attention for layer, _ in groups if layer.attention is not None]
        has_state = self.has_state
        if not attn:
            return "SSM" if has_state else "none"
        if any(a.kind is AttentionKind.MLA for a in attn):
            return "MLA"
        if has_state:
            return "hybrid"
        kv_heads = {a.num_kv_heads for a in attn if a.kind is not AttentionKind.SHARED}
        if kv_heads == {1}:
            return "MQA"
        if self.num_attention_heads is not None and kv_heads == {self.num_attention_heads}:
            return "MHA"
        return "GQA"

    def layer_groups(self) -> list[tuple[LayerSpec, int]]:
        """Identical layers (index aside) grouped, in order of first appearance, with their counts."""
        return list(self._groups)

    @property
    def _groups(self) -> tuple[tuple[LayerSpec, int], ...]:
        # Computed once per layers tuple: engines ask for it on every estimate (1,000 deployments in a check,
        # a 40-step max-context search). Keyed on the tuple's identity, so a `replace` with new layers
        # does not reuse the groups of the old ones.
        cached = self.__dict__.get("_groups_of")
        if cached is None or cached[0] is not self.layers:
            cached = (self.layers, group_identical(self.layers))
            self.__dict__["_groups_of"] = cached
        return cached[1]

    @property
    def has_state(self) -> bool:
        """Whether any layer keeps a recurrent state."""
        return any(layer.state is not None for layer, _ in self._groups)

    @property
    def shared_indexer_layers(self) -> int:
        """DSA layers that reuse an earlier layer's top-k and run no indexer of their own (GLM-5.2)."""
        return sum(n for layer, n in self._groups if layer.attention is not None and layer.attention.index_shared)


def group_identical(layers: Sequence[LayerSpec]) -> tuple[tuple[LayerSpec, int], ...]:
    """Layers with equal caches grouped in order of first appearance. Layers of one kind share their cache
    objects (config.py `_layers`), so they are matched by identity first and compared by value once per
    distinct trio of objects, not once per layer."""
    first_of: dict[tuple[int, int, int], LayerSpec] = {}
    count_of: dict[tuple[int, int, int], int] = {}
    for layer in layers:
        ids = (id(layer.attention), id(layer.state), id(layer.cross))
        if ids in count_of:
            count_of[ids] += 1
        else:
            first_of[ids], count_of[ids] = layer, 1
    counts: dict[tuple[object, object, object], int] = {}
    first: dict[tuple[object, object, object], LayerSpec] = {}
    for ids, layer in first_of.items():
        key = (layer.attention, layer.state, layer.cross)
        first.setdefault(key, layer)
        counts[key] = counts.get(key, 0) + count_of[ids]
    return tuple((first[key], n) for key, n in counts.items())
