"""SGLang's pools for Gemma 4, worked by hand from the configs and SGLang's source.

What SGLang builds (read in the 0.5.11 .. 0.5.23 wheels, paths under sglang/srt/):
- Gemma4ForConditionalGeneration is a hybrid SWA architecture from 0.5.11 (configs/model_config.py
  is_hybrid_swa_model; 0.5.10 has no models/gemma4*.py). SGLang rewrites its config into one geometry per pool
  (utils/hf_transformers/config.py get_config, 0.5.22+ _apply_gemma4_attention_overrides): the full pool at
  global_head_dim with the global KV heads, the SWA pool at head_dim with num_key_value_heads; K = V layers still
  keep a K and a V buffer (models/gemma4_causal.py load_weights copies k_proj into both).
- Rows (model_executor/pool_configurator.py HybridSWAPoolConfigurator): full = max(1, kv // tp) x (D + Dv) x elem,
  SWA likewise; layer counts by layer_types over every layer, the KV-shared ones too: they keep a buffer of their
  own type, never written (Gemma4Attention `save_kv_cache=not self.is_kv_shared_layer`).
- Split: cell = full x n_full + 0.8 x swa x n_swa; full tokens = int(rest // cell); SWA = int(full x 0.8).
- A request's SWA slots: SGLang's window is sliding_window - 1 (models/gemma4_mm.py
  get_attention_sliding_window_size), plus the eviction interval (128 from 0.5.14; the window itself, in whole
  pages, in 0.5.11-0.5.13: schedule_batch.py maybe_evict_swa), a page, rounded to pages, plus the decode page.
- Pages: triton is forced (page 1) except on SM100: trtllm_mha (pages of 64) from 0.5.14, page 1 in 0.5.11-0.5.12,
  and in 0.5.13 trtllm_mha except modelopt FP4 MoE checkpoints (arg_groups/model_overrides/gemma4.py).

Layouts (registry configs): E2B 35 layers, 7 full (1 KV head x 512) and 28 sliding (1 x 256, window 512), the last
20 KV-shared; 31B 60 layers, 10 full (4 KV heads x 512, attention_k_eq_v) and 50 sliding (16 x 256, window 1024).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext
from tests.tiny_configs import registry_config

E2B = parse_config(registry_config("google/gemma-4-E2B-it"))
B31 = parse_config(registry_config("google/gemma-4-31B-it"))
GIB = 1 << 30
REST = 10 * GIB


def _engine(version: str = "0.5.23", capability: tuple[int, int] = (9, 0), platform: str = "cuda", **options):  # type: ignore[no-untyped-def]
    device = Device(total_memory_bytes=80 * GIB, capability=capability, platform=platform)  # type: ignore[arg-type]
    return get_engine("sglang", version, EngineContext(device=device), **options)


def test_e2b_pools_count_the_shared_layers() -> None:
    # full row 1 x (512 + 512) x 2 = 2,048 B x 7 layers = 14,336 B; SWA row 1 x 512 x 2 = 1,024 B x 28 = 28,672 B;
    # cell 14,336 + 0.8 x 28,672 = 37,273.6; 10,737,418,240 / 37,273.6 = 288,070.3 -> 288,070; SWA int(230,456.0).
    # Without the 20 shared layers (3 full, 12 sliding) the cell would be 6,144 + 9,830.4 = 15,974.4.
    pool = _engine().pool(E2B, available_bytes=REST, kv_dtype=KvDtype.BF16)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (288_070, 230_456)
    assert pool.cell_size == pytest.approx(37_273.6)
    # each pool keeps one padding page: 288,071 x 14,336 + 230,457 x 28,672
    assert pool.pool_bytes == 288_071 * 14_336 + 230_457 * 28_672


def test_31b_pools_keep_k_and_v_on_the_k_eq_v_layers() -> None:
    # full row 4 x (512 + 512) x 2 = 8,192 B x 10 = 81,920 B; SWA row 16 x 512 x 2 = 16,384 B x 50 = 819,200 B;
    # cell 81,920 + 0.8 x 819,200 = 737,280; 10,737,418,240 // 737,280 = 14,563; SWA int(11,650.4) = 11,650.
    pool = _engine().pool(B31, available_bytes=REST, kv_dtype=KvDtype.BF16)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (14_563, 11_650)
    # tp 2: full max(1, 4 // 2) = 2 heads -> 4,096 B, SWA 8 heads -> 8,192 B; cell 40,960 + 327,680 = 368,640
    pool = _engine().pool(B31, available_bytes=REST, kv_dtype=KvDtype.BF16, tp=2)
    assert pool.max_total_num_tokens == 10_737_418_240 // 368_640 == 29_127


@pytest.mark.parametrize(
    ("spec", "version", "expected"),
    [
        # E2B at 32,768, 0.5.23: full 7 x 2,048 x 32,768 = 469,762,048; SWA window 511 + 128 + 1 + 1 = 641 slots:
        # 28 x 1,024 x 641 = 18,378,752
        (E2B, "0.5.23", 469_762_048 + 18_378_752),
        # 0.5.13 evicts every window steps: 511 + 511 + 1 + 1 = 1,024 slots: 28 x 1,024 x 1,024 = 29,360,128
        (E2B, "0.5.13", 469_762_048 + 29_360_128),
        # 31B: full 10 x 8,192 x 32,768 = 2,684,354,560; SWA 1,023 + 128 + 2 = 1,153: 50 x 16,384 x 1,153
        (B31, "0.5.23", 2_684_354_560 + 944_537_600),
    ],
)
def test_request_at_32k(spec, version: str, expected: int) -> None:  # type: ignore[no-untyped-def]
    est = _engine(version).estimate(spec, ctx=32_768, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == expected


def test_sm100_pages_by_release() -> None:
    # B200 (10.0), 0.5.23: trtllm_mha, pages of 64. E2B at 32,768: full 32,768 slots; SWA pages(511 + 128 + 64 =
    # 703) = 704, + 64 = 768: 469,762,048 + 28 x 1,024 x 768 = 22,020,096
    est = _engine("0.5.23", (10, 0)).estimate(E2B, ctx=32_768, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == 469_762_048 + 22_020_096
    # 0.5.12 forces triton there: page 1, 641 slots as on an H100 (0.5.12 evicts every window: 1,024)
    est = _engine("0.5.12", (10, 0)).estimate(E2B, ctx=32_768, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == 469_762_048 + 29_360_128
    # 0.5.13 on SM100 depends on the checkpoint's quantization: refused unless the page is given
    with pytest.raises(UnsupportedArchitecture, match="modelopt FP4 MoE"):
        _engine("0.5.13", (10, 0)).estimate(E2B, ctx=32_768, batch=1, kv_dtype=KvDtype.BF16)
    given = _engine("0.5.13", (10, 0), block_size=64).estimate(E2B, ctx=32_768, batch=1, kv_dtype=KvDtype.BF16)
    # 0.5.13's interval: max(64, 511) // 64 x 64 = 448; pages(511 + 448 + 64 = 1,023) = 1,024, + 64 = 1,088
    assert given.kv_cache_bytes == 469_762_048 + 28 * 1024 * 1088


@pytest.mark.parametrize(
    ("version", "options", "kv", "says"),
    [
        ("0.5.10", {}, KvDtype.BF16, "has no Gemma 4"),
        ("0.5.23", {"platform": "rocm"}, KvDtype.BF16, "triton, not aiter, is forced there"),
        ("0.5.23", {}, KvDtype.NVFP4, "no FP4 branch"),
    ],
)
def test_refused_where_not_read(version: str, options: dict, kv: KvDtype, says: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(UnsupportedArchitecture, match=says):
        _engine(version, **options).estimate(E2B, ctx=8192, batch=1, kv_dtype=kv)


def test_fp8_rows_are_one_byte() -> None:
    # fp8_e4m3: 1 B per element in both pools: E2B cell 7,168 + 0.8 x 14,336 = 18,636.8; 10,737,418,240 / 18,636.8
    # = 576,140.7
    pool = _engine().pool(E2B, available_bytes=REST, kv_dtype=KvDtype.FP8_E4M3)
    assert pool.max_total_num_tokens == int(10_737_418_240 // 18_636.8) == 576_140


def test_text_only_gemma4_stays_refused() -> None:
    # A gemma4_text checkpoint (Gemma4ForCausalLM) does not get SGLang's per-pool config rewrite: not sized.
    raw = registry_config("google/gemma-4-E2B-it")
    raw["architectures"] = ["Gemma4ForCausalLM"]
    with pytest.raises(UnsupportedArchitecture, match="has not read how this engine pages"):
        _engine().estimate(parse_config(raw), ctx=8192, batch=1, kv_dtype=KvDtype.BF16)


# --- Gemma 3n ---------------------------------------------------------------------------------------------------

GEMMA3N = parse_config(json.loads((Path(__file__).parent / "data/never_silent/google--gemma-3n-E4B.json").read_text()))


def test_gemma3n_rows_for_every_layer_the_shared_ones_too() -> None:
    # SGLang 0.5.0+ serves Gemma 3n with every layer full attention (gemma2_gemma3.py disable_hybrid_swa_memory),
    # one row per layer of the stage: E4B's 35 layers (15 KV-shared) x 2 KV heads x (256 + 256) x 2 B = 71,680 B
    # per token; at 8,192 tokens 587,202,560 B; 10 GiB // 71,680 = 149,796 tokens.
    est = _engine("0.5.23").estimate(GEMMA3N, ctx=8192, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == 35 * 2048 * 8192 == 587_202_560
    pool = _engine("0.5.23").pool(GEMMA3N, available_bytes=REST, kv_dtype=KvDtype.BF16)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (149_796, None)
    assert _engine("0.5.0rc0").estimate(GEMMA3N, ctx=8192, batch=1, kv_dtype=KvDtype.BF16).kv_cache_bytes == (
        587_202_560
    )


@pytest.mark.parametrize("version", ["0.4.8", "0.4.10"])
def test_gemma3n_refused_before_0_5(version: str) -> None:
    # 0.4.8 has no models/gemma3n*.py; 0.4.9.post3-0.4.10 pool its sliding layers (GEMMA_SWA), shared rows unread
    with pytest.raises(UnsupportedArchitecture, match="Gemma 3n pages from 0.5.0 only"):
        _engine(version).estimate(GEMMA3N, ctx=8192, batch=1, kv_dtype=KvDtype.BF16)


# --- split pools: each holds the requests on its own -----------------------------------------------------------


def _fit(model: str, *args: str) -> list[dict]:  # type: ignore[type-arg]
    import json as _json

    from typer.testing import CliRunner

    from kvsize.cli.app import app

    result = CliRunner().invoke(
        app, [model, "--engine", "sglang", "--gpu", "h100", "--kv-memory", "10GiB", "--json", *args]
    )
    assert result.exit_code in (0, 1), result.stderr
    return [s["gpu"] for s in _json.loads(result.stdout)["scenarios"]]


def test_gpt_oss_requests_are_the_full_pools_not_the_bytes() -> None:
    # gpt-oss-20b, 10 GiB of KV: cell 12 x 2,048 + 0.8 x 12 x 2,048 = 44,236.8 B; full pool 10 GiB / 44,236.8 =
    # 242,725 tokens, SWA pool int(242,725 x 0.8) = 194,180. At 8,192 tokens a request holds 8,192 full slots and
    # 127 + 128 + 2 = 257 SWA slots: min(242,725 // 8,192, 194,180 // 257) = min(29, 755) = 29 requests. Priced by
    # bytes alone (24,576 x 8,192 + 24,576 x 257 = 207,642,624 B each) it would be 51: the pools do not trade.
    one, four = _fit("openai/gpt-oss-20b", "--ctx", "8192", "--batch", "1,4")
    assert one["max_concurrency"] == four["max_concurrency"] == 29
    # the longest context: max_req_len = 242,725 - 1 alone; four requests share the full pool: 242,725 // 4
    assert one["max_context_by_memory"] == 242_724
    assert four["max_context_by_memory"] == 60_681
    # 30 requests of 8,192 do not fit although their bytes (6.23e9) do
    (thirty,) = _fit("openai/gpt-oss-20b", "--ctx", "8192", "--batch", "30")
    assert not thirty["memory_fits"] and 10 * GIB >= 30 * 207_642_624


def test_gemma4_31b_requests_at_32k() -> None:
    # 31B, 10 GiB: full pool 14,563 tokens: not one request of 32,768 (the SWA pool's 11,650 // 1,153 would hold 10)
    (fit,) = _fit("google/gemma-4-31B-it", "--ctx", "32768")
    assert fit["max_concurrency"] == 0 and not fit["memory_fits"]


def test_a_swa_pool_at_its_window_does_not_start_from_0_5_20() -> None:
    # gpt-oss-20b on 150 x 44,236.8 B: full pool 150 tokens, SWA int(150 x 0.8) = 120 <= window 127 + page 1:
    # 0.5.20+ raise at start-up (validate_swa_pool_size); 0.5.19 starts and holds one 100-token request
    from kvsize.engines.sglang import SglangEngine

    gpt_oss = parse_config(registry_config("openai/gpt-oss-20b"))
    budget = int(150 * 44_236.8) + 1

    def limits(version: str):  # type: ignore[no-untyped-def]
        engine = _engine(version)
        assert isinstance(engine, SglangEngine)
        split = engine.split_pools(gpt_oss, available_bytes=budget, ctx=100, batch=1, kv_dtype=KvDtype.BF16)
        assert split is not None
        return split.requests, split.longest

    assert limits("0.5.20") == (0, 0)
    assert limits("0.5.19") == (1, 120)


def test_sglang_swa_note_names_the_releases_interval() -> None:
    gpt_oss = parse_config(registry_config("openai/gpt-oss-20b"))
    new = " ".join(get_engine("sglang", "0.5.23").estimate_notes(gpt_oss))
    old = " ".join(get_engine("sglang", "0.5.13").estimate_notes(gpt_oss))
    assert "128 (SGLANG_SWA_EVICTION_INTERVAL)" in new and "the window again" not in new
    assert "the window again" in old and "SGLANG_SWA_EVICTION_INTERVAL" not in old


def test_split_pool_longest_context_in_whole_pages() -> None:
    # gpt-oss-20b, 0.5.23, pages of 64, 1 GiB of KV: cell 12 x 2,048 + 0.8 x 12 x 2,048 = 44,236.8 B;
    # 1,073,741,824 / 44,236.8 = 24,272.6 -> 24,256 (whole pages); SWA int(24,256 x 0.8) = 19,404 -> 19,392. Per
    # request the SWA cap is pages(127 + 128 + 64) + 64 = 384; 60 requests need 23,040 > 19,392, so the SWA pool
    # binds the longest context while it holds every token: 19,392 // 60 = 323 -> 320 (whole pages of 64).
    gpt_oss = parse_config(registry_config("openai/gpt-oss-20b"))
    engine = get_engine("sglang", "0.5.23", block_size=64)
    pool = engine.pool(gpt_oss, available_bytes=GIB, kv_dtype=KvDtype.BF16)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (24_256, 19_392)
    limits = engine.split_pools(gpt_oss, available_bytes=GIB, ctx=256, batch=60, kv_dtype=KvDtype.BF16)
    assert limits is not None and limits.longest == 320
    # an empty budget under 0.5.19 (no start-up check): no request and no context, not -1
    empty = get_engine("sglang", "0.5.19").split_pools(
        gpt_oss, available_bytes=0, ctx=256, batch=1, kv_dtype=KvDtype.BF16
    )
    assert empty is not None and (empty.requests, empty.longest) == (0, 0)


def test_the_pool_line_names_both_pools_and_the_binding_concurrency() -> None:
    # gpt-oss-20b at 256 tokens on 10 GiB: full pool 242,725 / 256 = 948.1 requests, SWA pool 194,180 over
    # min(256, 257) = 256 slots = 758.5: the SWA pool binds, and the line says so
    (fit,) = _fit("openai/gpt-oss-20b", "--ctx", "256")
    assert (fit["kv_pool_tokens"], fit["kv_pool_swa_tokens"]) == (242_725, 194_180)
    assert fit["concurrency"] == pytest.approx(194_180 / 256)
    assert fit["max_concurrency"] == 194_180 // 256 == 758
