"""llama.cpp by build number (kvsize/engines/llamacpp_releases.py, issue 22): builds, llama-cpp-python versions,
commits and tree labels to eras, and one hand-worked figure per era whose rule differs.

Trees read: vendor/llama.cpp of llama-cpp-python 0.3.8 (7841fc723, 2025-03), 0.3.9 (8733e0cf6, 2025-05), 0.3.16
(4227c9be4, 2025-08-14), 0.3.20 (f49e91787, 2026-04), 0.3.30 (e3a74b299 = b9665, 2026-06), 0.3.36 (0c1e57098 =
b11312, 2026-10-01); start-up logs of b6209, b7445 and b8164 (tests/data/logs/llamacpp-*.log).
Llama-3.1-8B f16: 32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B per cell.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.llamacpp import LlamaCppEngine
from kvsize.errors import UsageError
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

FP16, BF16 = KvDtype.FP16, KvDtype.BF16
LLAMA = "meta-llama/Llama-3.1-8B"
PER_CELL = 131_072


def raw(hub_id: str) -> dict[str, Any]:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return dict(load_registry_config(entry))


def spec(hub_id: str) -> ArchSpec:
    return parse_config(raw(hub_id), source=hub_id)


def llamacpp(version: str | None = None, **options: Any) -> LlamaCppEngine:
    engine = get_engine("llamacpp", version, **options)
    assert isinstance(engine, LlamaCppEngine)
    return engine


@pytest.mark.parametrize(
    ("typed", "release", "era", "note"),
    [
        (None, "b11312", "11312", None),
        ("b11312", "b11312", "11312", None),
        ("11312", "b11312", "11312", None),
        ("b7445", "b7445", "7445", None),  # a build kvsize has a start-up log of
        ("b8000", "b8000", "7445", "lies between"),  # between b7445 and b9665: b7445's era, with a note
        ("b9665", "b9665", "9665", None),
        ("b12000", "b12000", "11312", "newer than the newest"),
        ("0.3.36", "llama-cpp-python 0.3.36", "11312", None),  # vendors 0c1e57098 = b11312
        ("0.3.30", "llama-cpp-python 0.3.30", "9665", None),  # vendors e3a74b299 = b9665
        ("0.3.16", "llama-cpp-python 0.3.16", "6209", None),  # 4227c9be4 (2025-08-14): the b6209 era's rules
        ("0.3.17", "llama-cpp-python 0.3.17", "6209", "not read"),
        ("0.3.40", "llama-cpp-python 0.3.40", "11312", "newer than the newest"),
        ("0.3.9", "llama-cpp-python 0.3.9", "2025-05", None),
        ("0.3.8", "llama-cpp-python 0.3.8", "2025-03", None),
        ("4227c9be", "4227c9be", "6209", None),  # the 0.3.16 tree's commit, as `version: 1 (4227c9b)` prints it
        ("e3a74b299", "b9665", "9665", None),
        ("2026-01", "2026-01", "11312", None),  # kvsize's old label of the 0.3.36 tree
        ("2025-04", "2025-04", "2025-05", None),  # kvsize's old label of the 0.3.9 tree (commit of 2025-05)
        ("2025-03", "2025-03", "2025-03", None),
    ],
)
def test_resolves_builds_versions_commits_and_labels(
    typed: str | None, release: str, era: str, note: str | None
) -> None:
    engine = llamacpp(typed)
    assert (engine.version, engine.rules_name) == (release, era)
    if note is None:
        assert engine.release_note is None
    else:
        assert engine.release_note is not None and note in engine.release_note


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("b5000", "older than the oldest build kvsize has pinned (b6209)"),
        ("0.3.2", "older than the oldest tree"),
        ("abcdef0", "not one kvsize has read"),
        ("master", "not a llama.cpp build"),
    ],
)
def test_refused(typed: str, why: str) -> None:
    with pytest.raises(UsageError, match=why.replace("(", r"\(").replace(")", r"\)")):
        llamacpp(typed)


def test_cell_padding_per_era() -> None:
    # -c 1030 -np 1, default flash attention.
    # 2025-03 / 2025-05 / b6209 (get_padding = flash_attn ? 256 : 32, -fa off by default, common/common.h@2025-08
    # `bool flash_attn = false`): pad(1030, 32) = 1,056 cells.
    for typed in ("2025-03", "2025-05", "b6209"):
        assert llamacpp(typed).estimate(spec(LLAMA), ctx=1030, batch=1, kv_dtype=FP16).kv_cache_bytes == (
            1056 * PER_CELL
        )
    # b9665 (llama-context.cpp:llama_context@b9665: n_ctx = GGML_PAD(n_ctx, 256)): 1,280 cells.
    assert llamacpp("b9665").estimate(spec(LLAMA), ctx=1030, batch=1, kv_dtype=FP16).kv_cache_bytes == 1280 * PER_CELL


def test_streams_per_era() -> None:
    # 3 requests of 100 tokens, -c 300 -np 3.
    # 2025-05: one unified cache (no streams): pad(300, 32) = 320 cells.
    est = llamacpp("2025-05").estimate(spec(LLAMA), ctx=100, batch=3, kv_dtype=FP16)
    assert est.kv_cache_bytes == 320 * PER_CELL
    # b6209 (llama-model.cpp:create_memory@2025-08, kv_unified false): n_ctx_per_stream = pad(cdiv(300, 3), 32) =
    # pad(100, 32) = 128 per stream, x 3 = 384 cells.
    est = llamacpp("b6209").estimate(spec(LLAMA), ctx=100, batch=3, kv_dtype=FP16)
    assert est.kv_cache_bytes == 384 * PER_CELL
    # b11312 (llama_context ctor): n_ctx = pad(300, 256) = 512; n_ctx_seq = pad(512 / 3 = 170, 256) = 256, x 3 = 768.
    est = llamacpp("b11312").estimate(spec(LLAMA), ctx=100, batch=3, kv_dtype=FP16)
    assert est.kv_cache_bytes == 768 * PER_CELL


def test_swa_cache_pads_to_32_without_flash_attention_in_2025_08() -> None:
    # gpt-oss-20b (12 full + 12 sliding layers, W 128, 8 KV heads x 64: 2,048 B per layer cell in bf16), -c 8192,
    # b6209: llama-kv-cache-unified-iswa.cpp@2025-08 size_swa = min(size_base, GGML_PAD(128 + 512, n_pad 32)) = 640
    # cells; full layers pad(8192, 32) = 8,192.
    est = llamacpp("b6209").estimate(spec("openai/gpt-oss-20b"), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 12 * 2048 * 8192 + 12 * 2048 * 640
    # b11312 pads it to 256: pad(640, 256) = 768 cells.
    est = llamacpp("b11312").estimate(spec("openai/gpt-oss-20b"), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 12 * 2048 * 8192 + 12 * 2048 * 768


def test_mla_layout_per_era() -> None:
    # DeepSeek-V3, 61 MLA layers, -c 1000 bf16.
    dsv3 = spec("deepseek-ai/DeepSeek-V3")
    # 2026-04 (0.3.20, llama-kv-cache.cpp:llama_kv_cache has_v = !is_mla): 576 x 2 = 1,152 B x 61 = 70,272 B per cell
    # x pad(1000, 256) = 1,024 cells = 71,958,528 B.
    assert llamacpp("2026-04").estimate(dsv3, ctx=1000, batch=1, kv_dtype=BF16).kv_cache_bytes == 71_958_528
    # b6209 (K 576 + V 512, no flash attention by default): 2,176 B x 61 = 132,736 B x pad(1000, 32) = 1,024 cells.
    assert llamacpp("b6209").estimate(dsv3, ctx=1000, batch=1, kv_dtype=BF16).kv_cache_bytes == 132_736 * 1024
    # b7445 .. b9664: PR #19067 (V-less, 2026-01-24) is not pinned to a build: refused, not guessed.
    with pytest.raises(UnsupportedArchitecture, match="not pinned"):
        llamacpp("b8000").estimate(dsv3, ctx=1000, batch=1, kv_dtype=BF16)


def deepseek_v32() -> ArchSpec:
    config = raw("deepseek-ai/DeepSeek-V3")
    config.update(
        model_type="deepseek_v32",
        architectures=["DeepseekV32ForCausalLM"],
        index_topk=2048,
        index_head_dim=128,
        index_n_heads=64,
    )
    return parse_config(config)


def test_deepseek_v32_indexer_cache() -> None:
    # llama-kv-cache-dsa.cpp:llama_kv_cache_dsa@b9665: the MLA cache (576 latent K, V-less) plus an indexer cache of
    # n_head_kv 1 x indexer_head_size 128 K rows in type_k: (576 + 128) x 2 B = 1,408 B x 61 layers = 85,888 B per
    # cell x 1,024 cells (-c 1000) = 87,949,312 B.
    for typed in ("b9665", "b11312"):
        est = llamacpp(typed).estimate(deepseek_v32(), ctx=1000, batch=1, kv_dtype=BF16)
        assert est.kv_cache_bytes == 87_949_312
    # q8_0: 576 / 32 x 34 = 612 B + 128 / 32 x 34 = 136 B = 748 B x 61 = 45,628 B x 1,024 = 46,723,072 B.
    est = llamacpp().estimate(deepseek_v32(), ctx=1000, batch=1, kv_dtype=KvDtype.Q8_0)
    assert est.kv_cache_bytes == 46_723_072
    # 0.3.20 (llama-model.cpp@2026-04 has no LLM_ARCH_DEEPSEEK32): refused.
    with pytest.raises(UnsupportedArchitecture, match="no DeepSeek-V3.2"):
        llamacpp("2026-04").estimate(deepseek_v32(), ctx=1000, batch=1, kv_dtype=BF16)


def test_draft_rows_for_mtp() -> None:
    # Qwen3.5-35B-A3B: 30 Gated DeltaNet layers (conv 8,192 x (4 - 1) = 24,576 f32, SSM 32 x 128 x 128 = 524,288
    # f32: (24,576 + 524,288) x 4 = 2,195,456 B per slot and layer) and 10 full layers (2 x (256 + 256) x 2 B =
    # 2,048 B per cell). -c 1000: 1,024 cells x 10 x 2,048 = 20,971,520 B of KV.
    model = spec("Qwen/Qwen3.5-35B-A3B")
    kv, state = 1024 * 10 * 2048, 30 * 2_195_456
    assert llamacpp("b9665").estimate(model, ctx=1000, batch=1, kv_dtype=BF16).kv_cache_bytes == kv + state
    # --spec-type mtp (b9665: need_n_rs_seq = draft.n_max, 3 by default; llama_memory_recurrent n_rows = mem_size x
    # (1 + n_rs_seq)): 4 rows per slot.
    est = llamacpp("b9665", draft="mtp").estimate(model, ctx=1000, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == kv + 4 * state
    # --draft-max 5, 2 sequences (-c 2000 -np 2: n_ctx pad(2000, 256) = 2,048; 2 streams of pad(1024, 256)):
    # 2 slots x 6 rows.
    est = llamacpp("b11312", draft="mtp", draft_max=5).estimate(model, ctx=1000, batch=2, kv_dtype=BF16)
    assert est.kv_cache_bytes == 2048 * 10 * 2048 + 2 * 6 * state
    # EAGLE3 keeps rows from b11312 (common/common.h@b11312), not at b9665 (MTP only).
    assert llamacpp("b9665", draft="eagle3").estimate(model, ctx=1000, batch=1, kv_dtype=BF16).kv_cache_bytes == (
        kv + state
    )
    est = llamacpp("b11312", draft="eagle3").estimate(model, ctx=1000, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == kv + 4 * state
    # Before the rows existed (b6209) a draft adds none.
    est = llamacpp("b6209", draft="mtp").estimate(model, ctx=1000, batch=1, kv_dtype=BF16, tp=1)
    assert est.kv_cache_bytes == 1024 * 10 * 2048 + state
