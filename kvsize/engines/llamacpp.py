"""llama.cpp: one fixed cache of `n_ctx` cells for all sequences, padded to 256, in GGML row formats.

Rules mirror the llama.cpp trees vendored by llama-cpp-python (0.3.36 = b11312, 2026-10-01, the newest); the rules
that changed across builds are switches in `kvsize/engines/llamacpp_releases.py` (`LlamaCppRules`, one era per
range of builds, docs/releases/llamacpp.md), read here as `self.rules`; this module compares no versions:

- Before the iSWA cache (`rules.iswa`, PR #13194, 2025-05) and per-sequence streams (`rules.streams`): one unified
  cache of `n_ctx` cells in every layer, sliding layers included. Until the 2026 trees (`rules.cell_pad`) each
  stream is padded to 256 cells with flash attention and to 32 without (`get_padding`: `flash_attn ? 256u : 32u`),
  and `-fa` was off by default (`rules.flash_attn_default`), so the default pad is 32.
- MLA (`rules.mla`): "V-less" since PR #19067 (2026-01-24), one latent K row of `kv_lora_rank + qk_rope_head_dim`
  (576) per cell (`llama_kv_cache` ctor: `has_v = !is_mla`); K (576) and V (`kv_lora_rank`, 512) rows from PR
  #12801 (2025-04); before it decompressed per-head K (`n_head x (qk_nope + qk_rope)`) and V
  (`n_head x v_head_dim`), which needs `qk_nope_head_dim` / `v_head_dim` in the spec.
- DeepSeek-V3.2 (`rules.indexer_cache`, b9665 on): `llama_kv_cache_dsa` keeps a second cache of indexer keys, one
  head of `index_head_dim` K-only rows per cell in the cache type, beside the MLA cache (llama-kv-cache-dsa.cpp).
- Speculative drafts with recurrent rows (`rules.draft_row_types`: MTP, later EAGLE3 / DFlash / DSpark): the
  recurrent state keeps `mem_size x (1 + n_rs_seq)` rows with `n_rs_seq = --draft-max` (3 by default) for the
  models that support rollback (`rules.rollback_models`; llama-memory-recurrent.cpp, common/common.h
  need_n_rs_seq).

Mapping from kvsize's (ctx, batch) to llama.cpp: `batch` requests of `ctx` tokens are `-np batch` sequences
(`n_seq_max`) sharing `-c ctx x batch` (`n_ctx` counts the cells of all sequences). `llama_context` pads
`n_ctx = GGML_PAD(n_ctx, 256)` (`src/llama-context.cpp`). An explicit `-np` keeps `kv_unified` at its default,
false (`common/common.h`), so `n_seq` streams of `n_ctx_seq = GGML_PAD(n_ctx / n_seq, 256)` cells; only
`--kv-unified` or llama-server's `-np auto` (its default: 4 slots and `kv_unified = true`, tools/server/server.cpp)
give one stream of `n_ctx` cells. So `kv_cache_bytes` is the whole cache, `bytes_per_request` its share per
sequence (rounded up), and a layer's `tokens_held` counts the cells of the whole cache.

- Rows: K `ggml_new_tensor_3d(type_k, n_embd_k_gqa, kv_size, n_stream)` and V likewise, `n_embd_k_gqa =
  n_embd_head_k x n_head_kv(il)`; a row costs `ggml_row_size` (block formats: 34 B per 32 for q8_0, 18 for q4_0 /
  iq4_nl, 20 for q4_1, 22 for q5_0, 24 for q5_1; `gguf/constants.py GGML_QUANT_SIZES`). Layers without KV
  (`hparams.has_kv(il)`: Gemma 3n shared layers, Nemotron-NAS no-op blocks) get no tensor.
- Cache types (`kv_cache_types`, `common/arg.cpp`): f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1. A block
  type must divide the head size (`llama_init_from_model`, `src/llama-context.cpp`: "K cache type %s with block
  size %u does not divide n_embd_head_k=%u", and the same for V); a quantized V cache needs flash attention.
- Sliding windows (`llama_kv_cache_iswa`, `src/llama-kv-cache-iswa.cpp`) for the architectures llama.cpp runs with
  SWA (Gemma 2/3/3n, Cohere 2, EXAONE 4, gpt-oss, Llama 4 chunked layers): `GGML_PAD(min(n_ctx_seq, n_swa x
  (unified ? n_seq : 1) + n_ubatch), 256)` cells per stream (`n_ubatch` 512, `common/common.h`), or `n_ctx_seq`
  with `swa_full` (`--swa-full`; llama-server defaults to False, the C API to True). `n_ubatch =
  min(min(n_ctx, n_batch), n_ubatch)` (`llama_context` ctor: n_batch 2048 and n_ubatch 512 by default;
  `--batch-size`, `--ubatch-size`).
- Without flash attention the V cache is stored transposed and every layer's V row is `n_embd_v_gqa_max` wide
  (`llama_kv_cache` ctor: `v_trans ? hparams.n_embd_v_gqa_max() : n_embd_v_gqa(il)`; `v_trans = !flash_attn`).
  Flash attention defaults to auto (on where supported), so kvsize assumes it on for 2026-01.
- Other architectures run their sliding layers as full attention (Mistral, Starcoder2 and Qwen2 have no SWA in
  llama.cpp; Phi-3's is disabled in `llama_model::load_hparams`).
- Recurrent layers (`llama_memory_recurrent`, `src/llama-memory-recurrent.cpp`): `max(1, n_seq_max)` slots of f32
  `r` (conv, `(d_conv - 1) x channels`) and `s` (SSM) states; hybrids (`llama_memory_hybrid`) add a normal KV cache
  for their attention layers.
- No tensor parallelism: `--tp` above 1 is an error. (`-sm tensor`, 2026-04, splits weights and KV across GPUs
  as an experimental mode; kvsize does not model it.) `--pp N` is llama.cpp's default layer split over N GPUs
  (`-sm layer`, `llama_model::load_tensors`, `src/llama-model.cpp`): layer `il` goes to the device whose split
  point exceeds `il / (n_layer + 1)` (the output layer takes the last slot), with equal splits for equal GPUs
  (llama.cpp splits by free memory by default); each layer's cache lives with its layer.
"""

from __future__ import annotations

import msgspec

from kvsize.dtypes import KvDtype
from kvsize.engines.base import PER_TOKEN_KINDS, Engine, UnsupportedArchitecture, cdiv, storage_text
from kvsize.engines.llamacpp_releases import DRAFT_TYPES, LLAMACPP_RELEASES, LlamaCppRules
from kvsize.errors import UsageError
from kvsize.sizing import KvEstimate, LayerGroupCost
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateSpec

CELL_PAD = 256  # llama-context.cpp: cparams.n_ctx = GGML_PAD(cparams.n_ctx, 256); iSWA size_swa padded to 256
CELL_PAD_NO_FA = 32  # rules.cell_pad "kv_padding": llama_kv_cache_unified::get_padding = flash_attn ? 256 : 32
DEFAULT_N_BATCH = 2048  # common/common.h common_params.n_batch
DEFAULT_N_UBATCH = 512  # common/common.h common_params.n_ubatch
DEFAULT_DRAFT_MAX = 3  # common/common.h common_params_speculative draft.n_max
LLAMA_MAX_SEQ = 256  # src/llama-cparams.h: n_seq_max must be <= LLAMA_MAX_SEQ

# GGML cache types llama.cpp accepts (-ctk / -ctv, common/arg.cpp kv_cache_types), by kvsize format.
GGML_TYPE_NAMES = {
    KvDtype.FP32: "f32",
    KvDtype.FP16: "f16",
    KvDtype.BF16: "bf16",
    KvDtype.Q8_0: "q8_0",
    KvDtype.Q4_0: "q4_0",
    KvDtype.Q4_1: "q4_1",
    KvDtype.IQ4_NL: "iq4_nl",
    KvDtype.Q5_0: "q5_0",
    KvDtype.Q5_1: "q5_1",
}

# Architectures whose sliding / chunked layers llama.cpp keeps in the iSWA cache (llama_model::load_hparams sets
# swa_type and n_swa): Gemma 2/3/3n, Cohere 2, EXAONE 4 (32B), gpt-oss (OPENAI_MOE), Llama 4 (chunked).
SWA_MODEL_TYPES = frozenset(
    {
        "gemma2",
        "gemma3",
        "gemma3_text",
        "gemma3n",
        "gemma3n_text",
        "cohere2",
        "exaone4",
        "gpt_oss",
        "llama4",
        "llama4_text",
    }
)

UNSERVED_MODEL_TYPES = {
    "mllama": "llama.cpp has no Llama 3.2 Vision (cross-attention) implementation",
    "mllama_text_model": "llama.cpp has no Llama 3.2 Vision (cross-attention) implementation",
    "zamba": "llama.cpp has no Zamba implementation",
    "zamba2": "llama.cpp has no Zamba2 implementation",
}


def gpad(n: int, pad: int = CELL_PAD) -> int:
    """GGML_PAD: round up to a multiple of `pad`."""
    return cdiv(n, pad) * pad


def llamacpp_layer_split(num_layers: int, n_gpus: int) -> list[range]:
    """Layers of each GPU in llama.cpp's layer split with equal splits: device(il) = the first split point above
    il / (n_layer + 1) = floor(il x n_gpus / (n_layer + 1)) (llama_model::load_tensors, std::upper_bound)."""
    if n_gpus > num_layers:
        raise UsageError(f"--pp {n_gpus} exceeds the model's {num_layers} layers")
    device = [il * n_gpus // (num_layers + 1) for il in range(num_layers)]
    stages = []
    for d in range(n_gpus):
        first = device.index(d) if d in device else 0
        stages.append(range(first, first + device.count(d)))
    return stages


class CacheShape(msgspec.Struct, frozen=True):
    """llama.cpp's context for `n_seq` sequences."""

    n_seq: int
    """n_seq_max (llama-server -np)."""
    n_stream: int
    """1 with the unified cache, n_seq otherwise."""
    n_ctx_seq: int
    """Cells per stream of a full-attention layer."""

    @property
    def n_ctx(self) -> int:
        return self.n_stream * self.n_ctx_seq


class LlamaCppEngine(Engine):
    name = "llamacpp"
    title = "llama.cpp"
    releases = LLAMACPP_RELEASES
    versions = tuple(era.name for era in reversed(LLAMACPP_RELEASES.eras))

    def __init__(
        self,
        version: str | None = None,
        *,
        kv_unified: bool | None = None,
        swa_full: bool = False,
        n_ubatch: int | None = None,
        n_batch: int | None = None,
        flash_attn: bool | None = None,
        draft: str | None = None,
        draft_max: int | None = None,
    ) -> None:
        super().__init__(version)
        for what, value in (("--ubatch-size", n_ubatch), ("--batch-size", n_batch), ("--draft-max", draft_max)):
            if value is not None and value < 1:
                raise UsageError(f"{what} must be positive, got {value}")
        if draft is not None and draft not in DRAFT_TYPES:
            raise UsageError(f"unknown draft type '{draft[:20]}'", hint=f"One of: {', '.join(DRAFT_TYPES)}.")
        rules = self.rules
        # Without streams every cache was one unified cache; with them, -np N keeps kv_unified false.
        self.kv_unified = True if not rules.streams else bool(kv_unified)
        self.swa_full = swa_full
        self.n_ubatch_param = n_ubatch or DEFAULT_N_UBATCH
        self.n_batch_param = n_batch or DEFAULT_N_BATCH
        self.flash_attn = flash_attn if flash_attn is not None else rules.flash_attn_default
        self.draft = draft
        self.draft_max = draft_max or DEFAULT_DRAFT_MAX

    @property
    def rules(self) -> LlamaCppRules:
        """The switches of the era that sizes this build (kvsize/engines/llamacpp_releases.py)."""
        assert self.era is not None
        rules: LlamaCppRules = self.era.rules
        return rules

    def n_rs_seq(self, spec: ArchSpec) -> int:
        """Extra recurrent-state rows per slot for speculative drafts (llama-context.cpp: n_rs_seq clamped to 0
        for models without rollback; common/common.h need_n_rs_seq = draft.n_max)."""
        rules = self.rules
        if self.draft in rules.draft_row_types and spec.model_type in rules.rollback_models:
            return self.draft_max
        return 0

    @property
    def n_ubatch(self) -> int:
        """The physical batch before the context caps it (min(n_batch, n_ubatch))."""
        return min(self.n_batch_param, self.n_ubatch_param)

    def effective_n_ubatch(self, n_ctx_param: int) -> int:
        """`cparams.n_ubatch = min(min(n_ctx, n_batch), n_ubatch)` (llama_context ctor, src/llama-context.cpp),
        with n_ctx the requested context before padding."""
        return min(min(n_ctx_param, self.n_batch_param), self.n_ubatch_param)

    @property
    def rule(self) -> str:
        rules = self.rules
        mla = {
            "latent_k": "MLA latent K only (576, V-less)",
            "k_and_v": "MLA latent K 576 + V 512",
            "per_head": "MLA per-head K and V",
            "unpinned": "MLA not modelled (V-less change not pinned to a build)",
        }[rules.mla]
        if rules.indexer_cache:
            mla += "; DeepSeek-V3.2 indexer keys cached beside it"
        rows = " x (1 + --draft-max) with MTP-like drafts" if rules.draft_row_types else ""
        label = f"llama.cpp {self.version}"
        if not rules.iswa:
            return (
                f"{label} (before iSWA): batch sequences share one cache of pad(ctx x batch, {self._pad}) "
                f"cells in every layer, sliding layers included; GGML rows; {mla}; recurrent f32 states, "
                "max(1, n_seq) slots; no TP (src/llama-kv-cache.cpp get_padding)"
            )
        pad = self._pad
        per_seq = "pad(pad(ctx x batch, 256) / batch, 256)" if rules.cell_pad == "context_256" else f"pad(ctx, {pad})"
        streams = (
            f"one unified stream of pad(ctx x batch, {pad}) cells"
            if self.kv_unified
            else f"one stream per sequence of {per_seq} cells"
        )
        swa = "full" if self.swa_full else f"pad(min(n_ctx_seq, W x n_seq + min(n_ctx, {self.n_ubatch})), {pad})"
        if not self.flash_attn:
            mla += "; V rows n_embd_v_gqa_max wide (no flash attention)"
        return (
            f"{label}: batch sequences share {streams}; GGML rows (block types per 32 elements); "
            f"iSWA layers {swa} cells; {mla}; recurrent f32 states, max(1, n_seq){rows} slots; no TP "
            "(src/llama-context.cpp, src/llama-kv-cache.cpp, src/llama-kv-cache-iswa.cpp)"
        )

    # --- what llama.cpp serves --------------------------------------------------------------------------

    def check_serves(self, spec: ArchSpec) -> None:
        reason = UNSERVED_MODEL_TYPES.get(spec.model_type)
        if reason is not None:
            raise UnsupportedArchitecture(f"{spec.model_type}: {reason}")
        for layer, _ in spec.layer_groups():  # identical layers are checked once (100,000-layer configs)
            attn = layer.attention
            if attn is None:
                continue
            if attn.kind is AttentionKind.CROSS:
                raise UnsupportedArchitecture(f"{spec.model_type}: llama.cpp has no cross-attention KV cache")
            if attn.kind is AttentionKind.MLA:
                self._check_mla(spec, attn)

    def _check_mla(self, spec: ArchSpec, attn: AttentionSpec) -> None:
        rules = self.rules
        if rules.mla == "unpinned":
            raise UnsupportedArchitecture(
                f"{spec.model_type}: llama.cpp {self.version}'s MLA cache is not pinned: V-less MLA (PR #19067, "
                "2026-01-24) arrived between b7445 and b9665 at a build kvsize has not read",
                hint="Use --engine-version 2026-04 (V-less, llama-cpp-python 0.3.20) or 2025-08 (K + V) to bound it.",
            )
        if rules.mla == "per_head":
            self._per_head_mla(spec, attn)
        if attn.index_head_dim is not None and not rules.indexer_cache:
            raise UnsupportedArchitecture(
                f"{spec.model_type}: llama.cpp {self.version} has no DeepSeek-V3.2 (sparse attention) architecture",
                hint="llama.cpp serves it from b9665 (llama-cpp-python 0.3.30) on.",
            )

    def check_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:
        """The cache type exists in llama.cpp and its block size divides every head size."""
        if dtype not in GGML_TYPE_NAMES:
            raise UnsupportedArchitecture(
                f"llama.cpp has no {dtype.value} cache type",
                hint=f"-ctk / -ctv accept: {', '.join(GGML_TYPE_NAMES.values())}.",
            )
        block = dtype.storage.block_elems
        if block == 1:
            return
        for layer, _ in spec.layer_groups():
            if layer.attention is None or layer.attention.kind is AttentionKind.SHARED:
                continue
            head_k, head_v = self._head_sizes(spec, layer.attention)
            for which, size in (("K", head_k), ("V", head_v)):
                if size % block:
                    raise UnsupportedArchitecture(
                        f"llama.cpp: {which} cache type {GGML_TYPE_NAMES[dtype]} with block size {block} does not "
                        f"divide n_embd_head_{which.lower()}={size}",
                        hint="Use f16, bf16 or f32 for this model.",
                    )

    # --- geometry ---------------------------------------------------------------------------------------

    def cache(self, ctx: int, batch: int) -> CacheShape:
        """The context llama.cpp builds for `batch` sequences of `ctx` tokens (-c ctx*batch -np batch)."""
        if self.rules.cell_pad == "kv_padding":
            # llama_model::create_memory: n_ctx_per_stream = pad(cdiv(n_ctx, n_seq), get_padding) unless unified.
            if self.kv_unified:
                return CacheShape(n_seq=batch, n_stream=1, n_ctx_seq=gpad(ctx * batch, self._pad))
            return CacheShape(n_seq=batch, n_stream=batch, n_ctx_seq=gpad(cdiv(ctx * batch, batch), self._pad))
        n_ctx = gpad(ctx * batch)
        if self.kv_unified:
            return CacheShape(n_seq=batch, n_stream=1, n_ctx_seq=n_ctx)
        return CacheShape(n_seq=batch, n_stream=batch, n_ctx_seq=gpad(n_ctx // batch))

    @property
    def _pad(self) -> int:
        """Cells a stream is padded to: 256 with the context padding, else get_padding (flash_attn ? 256 : 32)."""
        return CELL_PAD if self.flash_attn or self.rules.cell_pad == "context_256" else CELL_PAD_NO_FA

    def _per_head_mla(self, spec: ArchSpec, attn: AttentionSpec) -> tuple[int, int, int]:
        """(n_head, qk_nope_head_dim, v_head_dim) of a decompressed MLA layer (llama.cpp before 2025-04)."""
        # getattr: these MLA fields are optional in the architecture spec.
        nope = getattr(attn, "qk_nope_head_dim", None)
        v_dim = getattr(attn, "v_head_dim", None)
        n_head = getattr(attn, "num_query_heads", None) or spec.num_attention_heads
        if not isinstance(nope, int) or not isinstance(v_dim, int) or not isinstance(n_head, int):
            raise UnsupportedArchitecture(
                f"{spec.model_type}: llama.cpp {self.version} cached per-head MLA K/V, which needs qk_nope_head_dim "
                "and v_head_dim; kvsize's architecture spec does not carry them",
                hint="Use --engine-version 2026-10 or 2025-05.",
            )
        return n_head, nope, v_dim

    def _head_sizes(self, spec: ArchSpec, attn: AttentionSpec) -> tuple[int, int]:
        """(n_embd_head_k, n_embd_head_v) as llama.cpp's block-size check sees them."""
        if attn.kind is AttentionKind.MLA:
            if self.rules.mla == "per_head":
                _, nope, v_dim = self._per_head_mla(spec, attn)
                return nope + (attn.qk_rope_head_dim or 0), v_dim
            return attn.head_dim, attn.kv_lora_rank or 0
        return attn.head_dim, attn.head_dim_v

    def _keys_indexer(self, spec: ArchSpec, attn: AttentionSpec) -> bool:
        """Whether this layer keeps DSA indexer keys: DeepSeek-V3.2 on every layer; GLM-5 per rules.glm_dsa_indexer."""
        if not attn.index_head_dim:
            return False
        if spec.model_type != "glm_moe_dsa":
            return True
        return self.rules.glm_dsa_indexer == "full_layers" and not attn.index_shared

    def row_bytes_per_cell(self, spec: ArchSpec, attn: AttentionSpec, dtype: KvDtype) -> int:
        """Bytes of one cell of one layer: the K row and the V row over all KV heads (ggml_row_size)."""
        if attn.kind is AttentionKind.SHARED:
            return 0
        if attn.kind is AttentionKind.MLA:
            # llama_kv_cache_dsa: the indexer's K-only cache, one head of index_head_dim, in type_k.
            indexer = self.row_bytes(attn.index_head_dim or 0, dtype) if self._keys_indexer(spec, attn) else 0
            mla = self.rules.mla
            if mla == "latent_k":
                return self.row_bytes(attn.head_dim, dtype) + indexer  # V-less: one latent row
            if mla == "k_and_v":
                return self.row_bytes(attn.head_dim, dtype) + self.row_bytes(attn.kv_lora_rank or 0, dtype)
            n_head, nope, v_dim = self._per_head_mla(spec, attn)
            k = n_head * (nope + (attn.qk_rope_head_dim or 0))
            return self.row_bytes(k, dtype) + self.row_bytes(n_head * v_dim, dtype)
        heads = attn.num_kv_heads
        v_width = heads * attn.head_dim_v
        if not self.flash_attn and self.rules.iswa:
            v_width = self._n_embd_v_gqa_max(spec)  # transposed V: every layer as wide as the widest
        return self.row_bytes(heads * attn.head_dim, dtype) + self.row_bytes(v_width, dtype)

    @staticmethod
    def _n_embd_v_gqa_max(spec: ArchSpec) -> int:
        """hparams.n_embd_v_gqa_max(): the widest V row over the layers (src/llama-hparams.cpp)."""
        return max(
            (
                layer.attention.num_kv_heads * layer.attention.head_dim_v
                for layer in spec.layers
                if layer.attention is not None and layer.attention.kind not in (AttentionKind.SHARED, AttentionKind.MLA)
            ),
            default=0,
        )

    def _is_iswa(self, spec: ArchSpec, attn: AttentionSpec) -> bool:
        return (
            self.rules.iswa
            and attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED)
            and spec.model_type in SWA_MODEL_TYPES
        )

    def cells(self, spec: ArchSpec, attn: AttentionSpec, shape: CacheShape, n_ctx_param: int | None = None) -> int:
        """Cells one layer allocates in the whole cache (all streams). `n_ctx_param` is the -c asked for (the
        physical batch is capped by it); None: the padded context."""
        if attn.kind is AttentionKind.SHARED:
            return 0
        if self._is_iswa(spec, attn) and not self.swa_full:
            assert attn.window is not None
            # llama_kv_cache_iswa ctor: size_swa = GGML_PAD(min(size_base, n_swa x (unified ? n_seq_max : 1)
            # + n_ubatch), 256) per stream.
            ubatch = self.effective_n_ubatch(n_ctx_param if n_ctx_param is not None else shape.n_ctx)
            span = attn.window * (shape.n_seq if self.kv_unified else 1) + ubatch
            return min(shape.n_ctx_seq, gpad(span, self._pad)) * shape.n_stream
        return shape.n_ctx

    def state_dtypes(self, spec: ArchSpec, state: StateSpec) -> tuple[KvDtype, KvDtype]:
        return KvDtype.FP32, KvDtype.FP32  # llama_model::create_memory: recurrent r and s states in GGML_TYPE_F32

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        """Cells for one sequence alone, iSWA assumed for windowed layers (estimate applies the model's rules)."""
        if attn.kind is AttentionKind.SHARED:
            return 0
        if not self.rules.iswa:
            return gpad(ctx, self._pad)
        if attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED) and not self.swa_full:
            assert attn.window is not None
            return min(gpad(ctx, self._pad), gpad(attn.window + self.effective_n_ubatch(ctx), self._pad))
        return gpad(ctx, self._pad)

    def layer_request_bytes(
        self, spec: ArchSpec, layer: LayerSpec, ctx: int, dtype: KvDtype, tp: int
    ) -> tuple[int, int, int]:
        """(bytes per cell, cells, state bytes) of one layer for one sequence alone (-c ctx -np 1)."""
        per_cell, cells, state, _ = self._layer(spec, layer, self.cache(ctx, 1), dtype, ctx)
        return per_cell, cells, state

    def _layer(
        self, spec: ArchSpec, layer: LayerSpec, shape: CacheShape, dtype: KvDtype, n_ctx_param: int | None = None
    ) -> tuple[int, int, int, int]:
        """(bytes per cell, cells in the whole cache, state bytes per slot, state slots) of one layer."""
        per_cell = cells = state = slots = 0
        if layer.attention is not None:
            per_cell = self.row_bytes_per_cell(spec, layer.attention, dtype)
            cells = self.cells(spec, layer.attention, shape, n_ctx_param) if per_cell else 0
        if layer.state is not None:
            state = self.state_bytes(spec, layer.state, 1)
            slots = max(1, shape.n_seq) * (1 + self.n_rs_seq(spec))
        return per_cell, cells, state, slots

    # --- summing ----------------------------------------------------------------------------------------

    def estimate(
        self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> KvEstimate:
        """The whole cache of `batch` sequences of `ctx` tokens: llama.cpp pads the shared context, not each
        request, so the total is not batch x one request."""
        self.check_encoder_decoder(spec)
        if tp < 1 or pp < 1:
            raise UsageError("--tp and --pp must be positive")
        if tp > 1:
            raise UsageError(
                "llama.cpp has no tensor parallelism",
                hint="Use --pp N for llama.cpp's layer split over N GPUs (-sm layer), or --tp 1.",
            )
        if batch > LLAMA_MAX_SEQ:
            raise UsageError(f"llama.cpp serves at most {LLAMA_MAX_SEQ} sequences (LLAMA_MAX_SEQ), got batch {batch}")
        self.check_supported(spec)
        self.check_dtype(spec, kv_dtype)
        shape = self.cache(ctx, batch)
        groups = []
        per_token = fixed = 0
        layer_total: dict[tuple[object, object, object], int] = {}  # one layer's bytes, per kind of layer
        for layer, count in spec.layer_groups():
            per_cell, cells, state, slots = self._layer(spec, layer, shape, kv_dtype, ctx * batch)
            layer_total[(layer.attention, layer.state, layer.cross)] = per_cell * cells + state * slots
            groups.append(
                LayerGroupCost(
                    kind=layer.kind,
                    count=count,
                    tokens_held=cells,
                    bytes_per_token=per_cell,
                    state_bytes=state,
                    bytes=count * (per_cell * cells + state * slots),
                )
            )
            fixed += count * state
            if layer.attention is not None and layer.attention.kind in PER_TOKEN_KINDS:
                per_token += count * per_cell
        total = sum(g.bytes for g in groups)
        stages = llamacpp_layer_split(spec.num_layers, pp)
        if len(stages) == 1:
            per_gpu = total
        else:
            per_gpu = max(
                sum(layer_total[(layer.attention, layer.state, layer.cross)] for layer in spec.layers[s.start : s.stop])
                for s in stages
            )
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
            block_size=None,
            kv_bytes_per_token=per_token,
            state_bytes_per_request=fixed,
            bytes_per_request=cdiv(total, batch),
            kv_cache_bytes=total,
            kv_cache_bytes_per_gpu=per_gpu,
            layers=tuple(groups),
            notes=self.estimate_notes(spec),
        )

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        notes = [
            "llama.cpp sizes one cache for all sequences: kvsize maps ctx x batch to -c ctx*batch -np batch"
            + (
                f" (one unified cache: llama.cpp {self.version} has no per-sequence streams)"
                if not self.rules.streams
                else " with the unified KV cache (--kv-unified, or llama-server's -np auto)"
                if self.kv_unified
                else ", one stream each (an explicit -np keeps kv_unified off; --kv-unified to share one)"
            )
        ]
        windowed = sum(
            count
            for layer, count in spec.layer_groups()
            if layer.attention is not None and layer.attention.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED)
        )
        if windowed and not self.rules.iswa:
            notes.append(
                f"llama.cpp {self.version} predates the iSWA cache (2025-05): {spec.model_type}'s {windowed} "
                "windowed layers hold every cell"
            )
        elif windowed and spec.model_type in SWA_MODEL_TYPES:
            notes.append(
                f"llama.cpp keeps {spec.model_type}'s {windowed} windowed layers in its iSWA cache of "
                + (
                    "n_ctx_seq cells (--swa-full)"
                    if self.swa_full
                    else f"pad(W x n_seq + min(n_ctx, n_ubatch {self.n_ubatch}), 256) cells"
                )
            )
        elif windowed:
            notes.append(
                f"llama.cpp runs {spec.model_type}'s {windowed} sliding-window layers as full attention (no SWA "
                "cache for this architecture)"
            )
        if self.rules.mla != "unpinned" and any(
            layer.attention is not None and layer.attention.kind is AttentionKind.MLA
            for layer, _ in spec.layer_groups()
        ):
            notes.append(
                {
                    "latent_k": "llama.cpp (since PR #19067, 2026-01-24) caches only the MLA latent K row (V-less)",
                    "k_and_v": "llama.cpp from PR #12801 (2025-04) to PR #19067 cached the MLA latent as K (576) plus "
                    "V (512)",
                    "per_head": "llama.cpp before PR #12801 (2025-04) cached MLA as decompressed per-head K and V",
                }[self.rules.mla]
            )
        keyed = [
            layer.attention
            for layer, _ in spec.layer_groups()
            if layer.attention is not None
            and layer.attention.kind is AttentionKind.MLA
            and layer.attention.index_head_dim
        ]
        if any(self._keys_indexer(spec, a) for a in keyed):
            notes.append(
                "llama.cpp keeps DSA indexer keys in a second cache (llama_kv_cache_dsa): one index_head_dim K row per "
                "cell and layer"
                + (" whose indexer is full" if spec.shared_indexer_layers else "")
                + ", in the cache type"
            )
        elif keyed:
            notes.append(
                f"llama.cpp {self.version} caches GLM-5's MLA latent only: it keeps no indexer keys for "
                "LLM_ARCH_GLM_DSA (llama-model.cpp create_memory; from b11312 it does, in llama_kv_cache_dsa)"
            )
        if spec.has_state:
            extra = self.n_rs_seq(spec)
            notes.append(
                "llama.cpp keeps recurrent conv and SSM states in f32, one slot per sequence"
                + (f", each with {extra} more rows for {self.draft} draft rollback (--draft-max)" if extra else "")
            )
        if spec.model_dtype == KvDtype.FP32.value:
            notes.append(
                "llama.cpp's default cache type is f16 whatever the weights; kv dtype auto follows the config's "
                "float32 here: pass --kv-dtype f16 to mirror llama.cpp's default"
            )
        return tuple(notes)

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    reserves_context_up_front = True  # llama_kv_cache allocates all -c cells when the context is created

    def residency_granularity(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        return CELL_PAD  # cells come in runs of 256 (gpad)

    def prefix_sharing_rule(self) -> str:
        return (
            "llama.cpp server slots do not share a common prefix: each slot keeps its own cells (a slot reuses "
            "its own previous prompt only, --cache-reuse), so every request stores it"
        )
