"""What an engine model is: per-layer rules, parallel splits, and the summing every engine shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from copy import copy
from typing import Any, ClassVar

import msgspec
from typing_extensions import Self

from kvsize.config import MIMO_V2_MODEL_TYPES
from kvsize.dtypes import KvDtype
from kvsize.engines.context import DEFAULT_CONTEXT, EngineContext
from kvsize.engines.releases import Era, ReleaseTable
from kvsize.errors import KvsizeError, UsageError
from kvsize.sizing import KvEstimate, LayerGroupCost
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateKind, StateSpec, group_identical

# The recurrent states every engine's state rule was read for; engines that size the newer kinds (KDA, short
# convolutions) name them in `sized_state_kinds`, the others refuse such models (`check_state_kind`).
CLASSIC_STATE_KINDS = frozenset({StateKind.MAMBA, StateKind.MAMBA2, StateKind.GATED_DELTANET, StateKind.LIGHTNING})

# Engines whose rules were read for models whose sliding and full layers differ in KV heads or head sizes (Gemma 4's
# full layers: global_head_dim x num_global_key_value_heads; MiMo-V2-Flash's sliding layers: swa_num_key_value_heads)
# and for these families' own layouts. The serving engines refuse them (`check_layout`): kvsize has not read how
# their allocators page layers of different page sizes (SGLang's SWA pool, TensorRT-LLM's per-window pools,
# llama.cpp's iSWA cache) nor these releases' model files. vLLM's Gemma 4, Gemma 3n and MiMo-V2 and SGLang's MiMo-V2
# were read (VllmEngine / SglangEngine.reads_layout).
MIXED_WIDTH_ENGINES = frozenset({"formula", "hf"})
_MIXED = "sliding and full layers of different KV heads or head sizes"
UNREAD_LAYOUT_FAMILIES = {  # model type -> (family, what kvsize has not read these engines' paging of)
    **dict.fromkeys(("gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"), ("Gemma 4", _MIXED)),
    "mimo_v2_flash": ("MiMo-V2-Flash", _MIXED),
    # Gemma 3n: the last layers reuse earlier layers' KV (transformers Gemma3nTextAttention, kv shared layers);
    # how each engine allocates (or skips) those layers' cache is not modelled.
    **dict.fromkeys(("gemma3n", "gemma3n_text"), ("Gemma 3n", "layers that reuse earlier layers' KV cache")),
    # DeepSeek-V4 (AttentionKind.COMPRESSED): vLLM 0.27.1+ has its own compressor and indexer caches, which kvsize
    # has not modelled; the other engines' releases read have no deepseek_v4 model.
    "deepseek_v4": ("DeepSeek-V4", "compressed sparse attention: a window plus compressed entries and indexer keys"),
    # GPT-Neo: alternating global and local (256-token) layers; vLLM and SGLang have no GPT-Neo model, and kvsize
    # has not read TensorRT-LLM's or llama.cpp's paging of its local layers
    "gpt_neo": ("GPT-Neo", "global and local attention layers"),
    # MiniMax-M3: vLLM 0.25+ keeps its indexer keys in an fp8 side cache of its own (models/minimax_m3), not read
    **dict.fromkeys(
        ("minimax_m3", "minimax_m3_vl_text"), ("MiniMax-M3", "full attention with a lightning-indexer key cache")
    ),
}

# Layer kinds whose cache grows with the context (the others are fixed per request or empty); a COMPRESSED layer's
# per-token part is its window of raw tokens (its compressed entries are counted with the state).
PER_TOKEN_KINDS = frozenset(
    {AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.MLA, AttentionKind.COMPRESSED}
)


def sliding_window_size_attention(spec: ArchSpec, attn: AttentionSpec) -> AttentionSpec:
    """`attn` with the window vLLM and SGLang attend over. MiMo-V2-Flash's layers take the config's
    sliding_window_size (vLLM models/mimo_v2*.py, SGLang models/mimo_v2.py and configs/model_config.py
    _get_sliding_window_size), where transformers' MiMoV2FlashConfig (and kvsize's spec) hold it + 1, the query
    counted; every other layer as parsed."""
    if spec.model_type in MIMO_V2_MODEL_TYPES and attn.kind is AttentionKind.SLIDING and (attn.window or 0) > 1:
        return msgspec.structs.replace(attn, window=(attn.window or 0) - 1)
    return attn


class UnsupportedArchitecture(KvsizeError):
    """The engine cannot serve this model (or kvsize does not know its rule for it)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def storage_text(dtype: KvDtype) -> str:
    s = dtype.storage
    if s.block_elems == 1:
        return f"{s.block_bytes} B per element"
    return f"{s.block_bytes} B per {s.block_elems} elements ({s.note})"


def group_layers(spec: ArchSpec, layers: Sequence[LayerSpec]) -> Sequence[tuple[LayerSpec, int]]:
    """Distinct layers of a stage with their counts (the whole model's grouping is computed once per spec)."""
    if layers is spec.layers:
        return spec.layer_groups()
    return list(group_identical(layers))


def pipeline_stages(num_layers: int, pp: int) -> list[range]:
    """Layers of each pipeline stage: an even split whose remainder goes to the stages before the last,
    counted backwards (vllm/distributed/utils.py get_pp_indices, without VLLM_PP_LAYER_PARTITION)."""
    if pp > num_layers:
        raise UsageError(f"--pp {pp} exceeds the model's {num_layers} layers")
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    starts = [sum(sizes[:i]) for i in range(pp)]
    return [range(start, start + size) for start, size in zip(starts, sizes, strict=True)]


def mixed_widths(spec: ArchSpec) -> bool:
    """Whether the sliding or chunked layers store other (KV heads, K head dim, V head dim) than the full layers."""
    shapes: dict[bool, set[tuple[int, int, int]]] = {True: set(), False: set()}
    for layer, _ in spec.layer_groups():
        a = layer.attention
        if a is not None and a.kind in (AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.CHUNKED):
            shapes[a.kind is AttentionKind.FULL].add((a.num_kv_heads, a.head_dim, a.head_dim_v))
    return bool(shapes[True] and shapes[False]) and shapes[True] != shapes[False]


def check_head_split(spec: ArchSpec, tp: int, *, engine: str, source: str, kv_rule: str = "divide") -> None:
    """Raise UsageError unless `tp` splits every attention layer's heads as the engine's attention modules assert:
    query heads divisible by tp; KV heads divisible by tp when there are at least tp of them, otherwise tp
    divisible by the KV heads (replicated, `kv_rule="divide"`: vLLM / SGLang LlamaAttention) or any count
    (`kv_rule="ceil"`: TensorRT-LLM rounds KV heads per rank up). MLA splits only the query heads."""
    if tp <= 1:
        return
    seen: set[tuple[int, int, bool]] = set()
    query = spec.num_attention_heads
    for layer, _ in spec.layer_groups():  # in order of first appearance: the first offending layer's error
        attn = layer.attention
        if attn is None or attn.kind is AttentionKind.SHARED:
            continue
        heads = attn.num_query_heads or query
        key = (heads or 0, attn.num_kv_heads, attn.kind is AttentionKind.MLA)
        if key in seen:
            continue
        seen.add(key)
        if heads and heads % tp:
            raise UsageError(
                f"--tp {tp} does not divide the model's {heads} attention heads: {engine} requires "
                f"num_attention_heads % tp == 0 ({source})",
                hint=f"Use a --tp that divides {heads}.",
            )
        kv = attn.num_kv_heads
        if attn.kind is AttentionKind.MLA or kv_rule != "divide" or kv == 0:
            continue
        if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
            raise UsageError(
                f"--tp {tp} cannot split the model's {kv} KV heads: {engine} requires kv_heads % tp == 0 when "
                f"kv_heads >= tp, else tp % kv_heads == 0 ({source})",
                hint=f"Use a --tp that divides {kv}, or a multiple of it.",
            )


class Engine(ABC):
    """An engine's allocation rules. Subclasses override only the rule that differs.

    Per-layer hooks work on one tensor-parallel rank; `estimate` sums layers per pipeline stage and
    multiplies by the ranks and requests.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    versions: ClassVar[tuple[str, ...]] = ("current",)
    """Releases whose rules differ, newest first; the first is the default."""
    serves_encoder_decoder: ClassVar[bool] = False
    """Whether kvsize models this engine's cache for encoder-decoder models (T5, BART, Whisper)."""
    sized_state_kinds: ClassVar[frozenset[StateKind]] = CLASSIC_STATE_KINDS
    """Recurrent states whose shape, dtype and pool kvsize has read for this engine; others are refused."""
    context: EngineContext = DEFAULT_CONTEXT
    """The device and scheduler settings the rules are evaluated for (`with_context`)."""

    releases: ClassVar[ReleaseTable[Any] | None] = None
    """The engine's eras of releases (kvsize/engines/releases.py), where its history is tabled."""
    era: Era[Any] | None = None
    """The era that sizes the release asked for (None for engines whose rule sets are named, not numbered)."""
    release_note: str | None = None
    """Set when the release asked for is sized with rules kvsize has not read for it (newer than the newest)."""

    def __init__(self, version: str | None = None) -> None:
        if self.releases is not None:
            resolved = self.releases.resolve(version)
            self.era, self.version, self.release_note = resolved.era, resolved.release, resolved.note
            return
        if version is not None and version not in self.versions:
            from kvsize.engines.releases import resolve_named

            version = resolve_named(self.name, self.versions, version).rules
        self.version = version if version is not None else self.versions[0]

    @property
    def rules_name(self) -> str:
        """The rule set applied: the era's id (its first release), or the named rule set."""
        return self.era.name if self.era is not None else self.version

    @property
    def rules_span(self) -> str | None:
        """The era's name (`0.21-0.25`), None for named rule sets."""
        if self.era is None or self.releases is None:
            return None
        return self.releases.span_of(self.era)

    @property
    def release_label(self) -> str:
        """`vLLM 0.24.0 (rules of 0.21-0.25)`: the release and the era whose rules size it."""
        if self.rules_span is None:
            return f"{self.title} {self.version}"
        return f"{self.title} {self.version} (rules of {self.rules_span})"

    def with_context(self, context: EngineContext | None) -> Self:
        """This engine evaluated for `context` (the GPU, scheduler settings); None keeps the current one."""
        if context is None:
            return self
        other = copy(self)
        other.context = context
        return other

    # --- the rule, in words ---------------------------------------------------------------------------

    @property
    @abstractmethod
    def rule(self) -> str:
        """The allocation rule applied, with its source, for the JSON and the table."""

    # --- what the engine serves -----------------------------------------------------------------------

    def check_supported(self, spec: ArchSpec) -> None:
        """Raise UnsupportedArchitecture when the engine cannot serve `spec`: a layout its rules were not read
        for (check_layout), then what the engine itself refuses (check_serves)."""
        self.check_layout(spec)
        self.check_serves(spec)

    def check_serves(self, spec: ArchSpec) -> None:  # noqa: B027  (most engines serve everything)
        """The engine's own refusals; an engine that refuses some models overrides this."""

    def check_layout(self, spec: ArchSpec) -> None:
        """Refuse layouts this engine's rules were not read for (MIXED_WIDTH_ENGINES, reads_layout)."""
        if self.name in MIXED_WIDTH_ENGINES or self.reads_layout(spec):
            return
        family, what = UNREAD_LAYOUT_FAMILIES.get(spec.model_type, (spec.model_type, _MIXED))
        # an indexer key on anything but an MLA layer (MiniMax-M3's full layers, DeepSeek-V4's compressed ones) is
        # a cache the serving engines' DSA rules were not read for, whatever the model type
        keyed = any(
            a.index_head_dim and a.kind is not AttentionKind.MLA
            for layer, _ in spec.layer_groups()
            if (a := layer.attention) is not None
        )
        if keyed and spec.model_type not in UNREAD_LAYOUT_FAMILIES:
            family, what = spec.model_type, "an indexer key beside non-MLA attention"
        if spec.model_type in UNREAD_LAYOUT_FAMILIES or keyed or mixed_widths(spec):
            raise UnsupportedArchitecture(
                f"{self.title}: kvsize has not read how this engine pages {family}'s layers ({what}), so it "
                "cannot size them",
                hint="Use --engine formula or --engine hf.",
            )

    def reads_layout(self, spec: ArchSpec) -> bool:
        """Whether this engine's paging was read for `spec`'s family although check_layout would refuse it (a
        serving engine that models some of UNREAD_LAYOUT_FAMILIES); its check_serves then refuses the releases,
        devices and dtypes that were not read."""
        return False

    def check_encoder_decoder(self, spec: ArchSpec) -> None:
        if spec.is_encoder_decoder and not self.serves_encoder_decoder:
            raise UnsupportedArchitecture(
                f"{self.title}: kvsize does not model this engine's cache for encoder-decoder models "
                f"({spec.model_type})",
                hint="Use --engine formula, or vllm for Whisper.",
            )

    def check_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:  # noqa: B027  (the formula takes any)
        """Raise UnsupportedArchitecture when the engine offers no KV cache in `dtype` for `spec`."""

    def peak_request_bytes(self, spec: ArchSpec, ctx: int, kv_dtype: KvDtype, pp: int = 1) -> int | None:
        """The most one request's cache holds on the busiest stage at any length up to `ctx`, where that can
        exceed its bytes at `ctx` (the hf engine on DeepSeek-V4); None where the bytes never fall as ctx grows."""
        return None

    def run_dtype(self, spec: ArchSpec) -> str:
        """The dtype the engine holds the model's weights and activations in (ArchSpec.model_dtype names);
        serving engines that cast a checkpoint (vLLM, SGLang --dtype auto on float32) override it."""
        return spec.model_dtype

    def auto_kv_dtype(self, spec: ArchSpec, chosen: KvDtype) -> KvDtype:
        """What `--kv-dtype auto` stores for this engine, given kvsize's choice (a config's KV quantization
        scheme, else the config's dtype); engines that serve a model in another dtype override it."""
        return chosen

    def auto_kv_reason(self, spec: ArchSpec, chosen: KvDtype) -> str:
        """Why `auto_kv_dtype` differs from kvsize's choice, for the note beside the figures."""
        return "the engine's rule"

    def check_parallel(self, spec: ArchSpec, tp: int, pp: int) -> None:  # noqa: B027  (the formula splits any)
        """Raise UsageError when the engine refuses to split `spec` over `tp` x `pp` GPUs (vLLM:
        ModelConfig.verify_with_parallel_config); engines override it with their own start-up checks."""

    # --- scheduling -----------------------------------------------------------------------------------

    def max_running_requests(self, spec: ArchSpec, max_model_len: int, tp: int = 1, pp: int = 1) -> int | None:
        """The most requests the engine runs at once whatever memory is left (vLLM max_num_seqs); None when
        the engine sets no cap of its own. Fit caps concurrency with it."""
        return None

    def stages(self, num_layers: int, pp: int) -> list[range]:
        """Layers of each pipeline stage (engines split the remainder differently)."""
        return pipeline_stages(num_layers, pp)

    # --- per layer, per rank --------------------------------------------------------------------------

    def kv_heads_per_rank(self, attn: AttentionSpec, tp: int) -> int:
        """KV heads one tensor-parallel rank stores: split, but never below one head (replicated when tp
        exceeds the head count; vLLM ModelConfig.get_num_kv_heads). An MLA latent is one head on every rank."""
        if attn.kind is AttentionKind.MLA:
            return attn.num_kv_heads
        return max(1, attn.num_kv_heads // tp)

    def row_bytes(self, elements: int, dtype: KvDtype) -> int:
        """Bytes of one head's K (or V) row: block formats round up to whole blocks with their scales."""
        return dtype.storage.bytes_for(elements) if elements else 0

    def attention_bytes_per_token(self, attn: AttentionSpec, dtype: KvDtype, tp: int = 1) -> int:
        """Bytes one cached token costs in one layer on one rank: every KV head's K row and V row."""
        if attn.kind is AttentionKind.SHARED:
            return 0
        heads = self.kv_heads_per_rank(attn, tp)
        return heads * (self.row_bytes(attn.head_dim, dtype) + self.row_bytes(attn.head_dim_v, dtype))

    @abstractmethod
    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        """Token slots one layer allocates for a request of `ctx` tokens (block rounding included)."""

    def check_state_kind(self, state: StateSpec) -> None:
        """Raise UnsupportedArchitecture for a recurrent state this engine's rules were not read for."""
        if state.kind not in self.sized_state_kinds:
            raise UnsupportedArchitecture(
                f"{self.title}: kvsize has not read how this engine keeps a {state.kind.value} state (its shape, "
                "dtype and place in the cache pool), so it cannot size it",
                hint="Use --engine formula (or hf where transformers has the model).",
            )

    def check_state_kinds(self, spec: ArchSpec) -> None:
        for layer, _ in spec.layer_groups():
            if layer.state is not None:
                self.check_state_kind(layer.state)

    def conv_state_kept(self, state: StateSpec) -> int:
        """Past inputs of the short convolution a cache keeps (vLLM, SGLang, llama.cpp: kernel - 1)."""
        self.check_state_kind(state)  # every engine's state rule passes through here
        return state.conv_kernel - 1

    def state_dtypes(self, spec: ArchSpec, state: StateSpec) -> tuple[KvDtype, KvDtype]:
        """(conv, SSM) state storage formats; the formula keeps both in the model's dtype."""
        return KvDtype(state.dtype), KvDtype(state.dtype)

    def state_bytes(self, spec: ArchSpec, state: StateSpec, tp: int = 1) -> int:
        """Bytes of one layer's recurrent state per request on one rank: channels and heads split over
        the tensor-parallel ranks (vLLM MambaStateShapeCalculator divides both by tp)."""
        conv_kept = self.conv_state_kept(state)
        conv_dtype, ssm_dtype = self.state_dtypes(spec, state)
        conv = cdiv(state.conv_channels, tp) * conv_kept
        ssm = cdiv(state.ssm_shape[0], tp) * (state.ssm_elements // state.ssm_shape[0]) if state.ssm_shape else 0
        return conv_dtype.storage.bytes_for(conv) + ssm_dtype.storage.bytes_for(ssm)

    def layer_request_bytes(
        self, spec: ArchSpec, layer: LayerSpec, ctx: int, dtype: KvDtype, tp: int
    ) -> tuple[int, int, int]:
        """(bytes per token slot, token slots, state bytes) of one layer for one request on one rank."""
        per_token = tokens = 0
        if layer.attention is not None:
            per_token = self.attention_bytes_per_token(layer.attention, dtype, tp)
            tokens = self.tokens_allocated(layer.attention, ctx) if per_token else 0
        state = self.state_bytes(spec, layer.state, tp) if layer.state is not None else 0
        if layer.cross is not None:  # the encoder's K/V: fixed per request, counted with the state
            state += self.attention_bytes_per_token(layer.cross, dtype, tp) * self.tokens_allocated(layer.cross, ctx)
        return per_token, tokens, state

    def stage_request_bytes(
        self, spec: ArchSpec, layers: Sequence[LayerSpec], ctx: int, dtype: KvDtype, tp: int
    ) -> int:
        """One request's cache on one rank of a pipeline stage holding `layers` (identical layers are
        computed once: a 61-layer model usually has one or two distinct layers)."""
        total = 0
        for layer, count in group_layers(spec, layers):
            per_token, tokens, state = self.layer_request_bytes(spec, layer, ctx, dtype, tp)
            total += count * (per_token * tokens + state)
        return total

    def block_size(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int | None:
        """Tokens per block, for paged engines."""
        return None

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        return ()

    # --- summing --------------------------------------------------------------------------------------

    def estimate(
        self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> KvEstimate:
        """Cache bytes of `batch` requests of `ctx` tokens each, on `tp` x `pp` GPUs."""
        if tp < 1 or pp < 1:
            raise UsageError("--tp and --pp must be positive")
        self.check_encoder_decoder(spec)
        self.check_state_kinds(spec)
        self.check_supported(spec)
        self.check_dtype(spec, kv_dtype)
        self.check_parallel(spec, tp, pp)
        stages = self.stages(spec.num_layers, pp)
        stage_layers = [spec.layers] if len(stages) == 1 else [[spec.layers[i] for i in s] for s in stages]
        per_stage = [self.stage_request_bytes(spec, layers, ctx, kv_dtype, tp) for layers in stage_layers]
        groups = []
        per_token = fixed = 0
        for layer, count in spec.layer_groups():
            slot_bytes, tokens, state = self.layer_request_bytes(spec, layer, ctx, kv_dtype, tp)
            groups.append(
                LayerGroupCost(
                    kind=layer.kind,
                    count=count,
                    tokens_held=tokens,
                    bytes_per_token=slot_bytes,
                    state_bytes=state,
                    bytes=count * batch * tp * (slot_bytes * tokens + state),
                )
            )
            fixed += count * tp * state
            kind = layer.attention.kind if layer.attention is not None else None
            if kind in PER_TOKEN_KINDS:
                per_token += count * tp * slot_bytes
            elif kind is AttentionKind.CROSS:  # the encoder's tokens: fixed per request
                fixed += count * tp * slot_bytes * tokens
        per_request = tp * sum(per_stage)
        return KvEstimate(
            engine=self.name,
            engine_version=self.version,
            engine_rules=self.rules_span,
            rule=self.rule,
            ctx=ctx,
            batch=batch,
            kv_dtype=kv_dtype,
            kv_dtype_storage=storage_text(kv_dtype),
            tp=tp,
            pp=pp,
            block_size=self.block_size(spec, kv_dtype, tp),
            kv_bytes_per_token=per_token,
            state_bytes_per_request=fixed,
            bytes_per_request=per_request,
            kv_cache_bytes=batch * per_request,
            kv_cache_bytes_per_gpu=batch * max(per_stage),
            layers=tuple(groups),
            notes=self.estimate_notes(spec),
        )

    # --- serving-time hooks (kvsize/serving.py) -------------------------------------------------------

    shares_prefixes: ClassVar[bool] = False
    """Whether the engine can store a prefix common to several requests once (prefix caching, radix cache,
    block reuse)."""
    reserves_context_up_front: ClassVar[bool] = False
    """Whether every request (slot) reserves its whole context at start-up, whatever it really holds."""
    recomputes_last_prompt_token: ClassVar[bool] = True
    """Whether a prefix hit stops one token short of the prompt (the last token is recomputed for logits)."""

    def residency_granularity(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        """Tokens over which a request's allocation stays constant as it grows (its block; 1 when it grows
        token by token): steady-state sums evaluate the allocation once per such run."""
        return self.block_size(spec, dtype, tp) or 1

    def prefix_caching_enabled(self, spec: ArchSpec) -> bool:
        """Whether sharing is on with this engine's settings (its default unless --no-enable-prefix-caching)."""
        return self.shares_prefixes and bool(getattr(self, "enable_prefix_caching", True))

    def prefix_sharing_rule(self) -> str:
        """How the engine shares a common prefix, with its source."""
        return f"{self.title} stores a common prefix once per request: it does not share prefixes"

    def prefix_shared_tokens(self, spec: ArchSpec, attn: AttentionSpec, hit: int, ctx: int, block: int) -> int:
        """Token slots of one `attn` layer that a prefix hit of `hit` tokens stores once for every request of
        `ctx` tokens (`block`: the engine's tokens per block, 1 where it does not page). Default: none."""
        return 0


def blocks_in_window(hit: int, ctx: int, skipped: int, block: int) -> int:
    """Whole prefix blocks still held by a windowed layer at `ctx`: blocks before floor(skipped / block) were
    freed (vLLM SingleTypeKVCacheManager.remove_skipped_blocks replaces them with the null block)."""
    return max(0, hit // block - skipped // block) * block
