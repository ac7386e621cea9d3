"""KV-cache storage formats and their exact byte cost. Stdlib only: the CLI imports it at start-up."""

from __future__ import annotations

from enum import Enum

import msgspec


class Storage(msgspec.Struct, frozen=True):
    """How a format packs elements: `block_bytes` bytes hold `block_elems` elements, scales included."""

    block_elems: int
    block_bytes: int
    note: str

    def bytes_for(self, num_elements: int) -> int:
        """Bytes for one contiguous vector of `num_elements` (a head's K or V row); partial blocks round up."""
        return -(-num_elements // self.block_elems) * self.block_bytes


class KvDtype(str, Enum):
    """Element formats a KV cache can be stored in. Values are the canonical names kvsize prints."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    INT8 = "int8"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"
    INT4 = "int4"
    # llama.cpp / GGML block formats (gguf-py constants.py GGML_QUANT_SIZES).
    Q8_0 = "q8_0"
    Q5_1 = "q5_1"
    Q5_0 = "q5_0"
    Q4_1 = "q4_1"
    Q4_0 = "q4_0"
    IQ4_NL = "iq4_nl"
    # vLLM-only layouts (vllm/config/cache.py CacheDType); their per-head or per-token extras are added by
    # the vLLM engine (kvsize/engines/vllm.py), the storage below is the payload alone.
    INT8_PER_TOKEN_HEAD = "int8_per_token_head"
    FP8_PER_TOKEN_HEAD = "fp8_per_token_head"
    INT4_PER_TOKEN_HEAD = "int4_per_token_head"
    FP8_DS_MLA = "fp8_ds_mla"
    NVFP4_DS_MLA = "nvfp4_ds_mla"

    @property
    def storage(self) -> Storage:
        return STORAGE[self]

    @property
    def bits_per_element(self) -> float:
        """Effective bits per element, scales included (for display only; sizing uses `storage`)."""
        return 8 * self.storage.block_bytes / self.storage.block_elems


STORAGE: dict[KvDtype, Storage] = {
    KvDtype.FP32: Storage(1, 4, "IEEE float32"),
    KvDtype.FP16: Storage(1, 2, "IEEE float16"),
    KvDtype.BF16: Storage(1, 2, "bfloat16"),
    # Per-tensor (per-layer) scales live outside the cache pool (vLLM k_scale/v_scale layer parameters).
    KvDtype.FP8_E4M3: Storage(1, 1, "float8 e4m3, per-tensor scale kept outside the cache"),
    KvDtype.FP8_E5M2: Storage(1, 1, "float8 e5m2, per-tensor scale kept outside the cache"),
    KvDtype.INT8: Storage(1, 1, "int8, per-tensor scale kept outside the cache"),
    # NVFP4: 16 e2m1 values (8 B) share one e4m3 scale (1 B): 9 B per 16 elements, 4.5 bits
    # (NVIDIA NVFP4 format; vLLM FlashInferBackend.customize_spec: D/2 + D/16 bytes per head).
    KvDtype.NVFP4: Storage(16, 9, "e2m1 with one e4m3 scale per 16 elements"),
    # MXFP4 (OCP Microscaling spec v1.0): 32 e2m1 values (16 B) share one E8M0 scale (1 B).
    KvDtype.MXFP4: Storage(32, 17, "e2m1 with one E8M0 scale per 32 elements (OCP MX)"),
    KvDtype.INT4: Storage(2, 1, "packed 4-bit integers, per-tensor scale kept outside the cache"),
    KvDtype.Q8_0: Storage(32, 34, "GGML q8_0: fp16 scale + 32 int8"),
    KvDtype.Q5_1: Storage(32, 24, "GGML q5_1: fp16 scale + fp16 min + 4 B high bits + 16 B"),
    KvDtype.Q5_0: Storage(32, 22, "GGML q5_0: fp16 scale + 4 B high bits + 16 B"),
    KvDtype.Q4_1: Storage(32, 20, "GGML q4_1: fp16 scale + fp16 min + 16 B"),
    KvDtype.Q4_0: Storage(32, 18, "GGML q4_0: fp16 scale + 16 B"),
    KvDtype.IQ4_NL: Storage(32, 18, "GGML iq4_nl: fp16 scale + 16 B (non-linear 4-bit)"),
    # vLLM TritonAttentionBackend.customize_spec: one fp32 scale inline after each head's K and V row.
    KvDtype.INT8_PER_TOKEN_HEAD: Storage(1, 1, "int8 + one inline fp32 scale per token, head and K/V"),
    KvDtype.FP8_PER_TOKEN_HEAD: Storage(1, 1, "float8 e4m3 + one inline fp32 scale per token, head and K/V"),
    KvDtype.INT4_PER_TOKEN_HEAD: Storage(2, 1, "packed int4 + one inline fp32 scale per token, head and K/V"),
    # vLLM FlashMLA sparse (DeepSeek-V3.2): 656 B and 352 B per token for the 512 + 64 latent.
    KvDtype.FP8_DS_MLA: Storage(1, 1, "DeepSeek MLA fp8: 512 e4m3 + 4 fp32 scales + 64 bf16 RoPE = 656 B/token"),
    KvDtype.NVFP4_DS_MLA: Storage(16, 9, "DeepSeek MLA nvfp4: 512 e2m1 + 32 e4m3 scales + 64 e4m3 RoPE = 352 B/token"),
}

# Spellings users type (vLLM's --kv-cache-dtype values, torch names, llama.cpp's -ctk values).
ALIASES: dict[str, KvDtype] = {
    "float32": KvDtype.FP32,
    "float": KvDtype.FP32,
    "f32": KvDtype.FP32,
    "float16": KvDtype.FP16,
    "half": KvDtype.FP16,
    "f16": KvDtype.FP16,
    "bfloat16": KvDtype.BF16,
    "fp8": KvDtype.FP8_E4M3,  # vLLM: "fp8" means e4m3 on CUDA (config/cache.py CacheDType)
    "float8_e4m3fn": KvDtype.FP8_E4M3,
    "float8_e4m3fnuz": KvDtype.FP8_E4M3,  # torch's ROCm spelling; a config's torch_dtype may say it
    "e4m3": KvDtype.FP8_E4M3,
    "float8_e5m2": KvDtype.FP8_E5M2,
    "float8_e5m2fnuz": KvDtype.FP8_E5M2,
    "e5m2": KvDtype.FP8_E5M2,
    "fp4": KvDtype.NVFP4,
    "uint4": KvDtype.INT4,
}

AUTO = "auto"


def parse_kv_dtype(name: str) -> KvDtype | None:
    """The format a user's spelling names, or None if unknown (`auto` is resolved elsewhere)."""
    key = name.strip().lower().replace("-", "_")
    if key in ALIASES:
        return ALIASES[key]
    try:
        return KvDtype(key)
    except ValueError:
        return None


def dtype_from_torch_name(name: str | None) -> KvDtype | None:
    """Map a config's `torch_dtype` / `dtype` string ("bfloat16", "float32", ...) to a KvDtype."""
    if not isinstance(name, str):
        return None
    return parse_kv_dtype(name.removeprefix("torch."))


def known_names() -> list[str]:
    return [AUTO, *(d.value for d in KvDtype), *ALIASES]
