"""SGLang's pools for MiMo-V2-Flash, worked by hand from the config and SGLang's source.

What SGLang builds (read in the 0.5.7, 0.5.8 and 0.5.9 sdists and the 0.5.23 wheel):
- MiMoV2FlashForCausalLM is a hybrid SWA architecture from 0.5.7 (its 39 sliding layers in the SWA pool, its 9
  full layers in the full pool). From 0.5.9 each pool has its own row geometry (model_runner_kv_cache_mixin.py
  set_num_token_hybrid; 0.5.23 model_executor/pool_configurator.py HybridSWAPoolConfigurator):
  full  = get_num_kv_heads(tp) x (head_dim + v_head_dim) x elem = max(1, 4 // tp) x (192 + 128) x 2 B,
  SWA   = get_swa_num_kv_heads(tp) x (swa_head_dim + swa_v_head_dim) x elem = max(1, 8 // tp) x 320 x 2 B.
  K and V keep their own widths (no padding). 0.5.7-0.5.8 add MiMo's SWA rows by a rule of their own: refused.
- Pool split: cell = F x 9 + 0.8 (swa_full_tokens_ratio) x S x 39; full tokens = available // cell; SWA tokens
  = int(full x 0.8).
- A request's SWA slots (compute_swa_request_cap, 0.5.23): the window (configs/model_config.py
  _get_sliding_window_size: sliding_window_size = 128, where transformers counts 129) + the eviction interval
  128 + a page, rounded to pages, + the decode page.
"""

from __future__ import annotations

import pytest

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext
from tests.tiny_configs import registry_config

MIMO = parse_config(registry_config("XiaomiMiMo/MiMo-V2-Flash"))
GIB = 1 << 30


def _engine(version: str = "0.5.23", capability: tuple[int, int] | None = (9, 0), platform: str = "cuda"):  # type: ignore[no-untyped-def]
    device = Device(total_memory_bytes=140 * GIB, capability=capability, platform=platform)  # type: ignore[arg-type]
    return get_engine("sglang", version, EngineContext(device=device))


@pytest.mark.parametrize(
    ("tp", "full", "swa"),
    [
        # tp 1: F = 4 x 320 x 2 = 2,560 B, S = 8 x 320 x 2 = 5,120 B; cell = 2,560 x 9 + 0.8 x 5,120 x 39 = 23,040
        # + 159,744 = 182,784 B; 10 GiB = 10,737,418,240 B // 182,784 = 58,743 (58,743 x 182,784 = 10,737,280,512;
        # one more is 10,737,463,296); SWA int(58,743 x 0.8) = int(46,994.4) = 46,994.
        (1, 58_743, 46_994),
        # tp 8: one KV head a rank on both (max(1, 4 // 8) replicated): F = S = 640 B; cell = 5,760 + 0.8 x 24,960
        # = 25,728 B; 10 GiB // 25,728 = 417,343 (x 25,728 = 10,737,400,704); SWA int(333,874.4) = 333,874.
        (8, 417_343, 333_874),
    ],
)
def test_pool_split_by_each_pools_geometry(tp: int, full: int, swa: int) -> None:
    pool = _engine().pool(MIMO, available_bytes=10 * GIB, kv_dtype=KvDtype.BF16, tp=tp)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (full, swa)


def test_a_request_at_32k() -> None:
    # tp 8, 32,768 tokens, page 1: full 9 layers x 32,768 x 640 B = 188,743,680 B; SWA slots 128 + 128 + 1 = 257,
    # + the decode page = 258 (a window of 129 would give 259): 39 x 258 x 640 = 6,439,680 B.
    est = _engine().estimate(MIMO, ctx=32_768, batch=1, kv_dtype=KvDtype.BF16, tp=8)
    assert est.kv_cache_bytes_per_gpu == 188_743_680 + 6_439_680


def test_sm100_takes_fa4_pages_only_from_0_5_23() -> None:
    # 0.5.23 arg_groups/overrides.py: unequal K / V widths on SM100 run FA4, pages of 128 (_fa4_page_constraint).
    assert _engine("0.5.23", (10, 0)).default_page_size(MIMO) == 128
    with pytest.raises(UnsupportedArchitecture, match="SM100"):
        _engine("0.5.22", (10, 0)).check_supported(MIMO)


@pytest.mark.parametrize(
    ("version", "capability", "platform", "match"),
    [
        ("0.5.8", (9, 0), "cuda", "0.5.7-0.5.8"),
        ("0.5.6", (9, 0), "cuda", "0.5.7-0.5.8"),  # no hybrid SWA pool for it yet
        ("0.5.23", None, "rocm", "which attention backend"),
    ],
)
def test_refused(version: str, capability: tuple[int, int] | None, platform: str, match: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match=match):
        _engine(version, capability, platform).check_supported(MIMO)


def test_the_other_serving_engines_still_refuse() -> None:
    for engine in ("trtllm", "llamacpp"):
        with pytest.raises(UnsupportedArchitecture, match="has not read how this engine pages"):
            get_engine(engine).check_supported(MIMO)


@pytest.mark.parametrize(
    ("prefix", "ctx", "sliding"),
    [
        # free_swa_out_of_window_slots: slots before ctx - 128 are freed. ctx 2,176: 2,048 of the 2,048 prefix
        # tokens are out (a window of 129 would keep one).
        (2_048, 2_176, 0),
        # ctx 2,100: ctx - 128 = 1,972 freed, so 2,048 - 1,972 = 76 prefix tokens are shared (77 with 129).
        (2_048, 2_100, 76),
        # ctx 100 inside the window: max(0, 100 - 128) = 0 freed, the whole 64-token prefix shared.
        (64, 100, 64),
    ],
)
def test_a_shared_prefix_in_the_swa_pool(prefix: int, ctx: int, sliding: int) -> None:
    from kvsize.serving import prefix_share

    got = prefix_share(_engine(), MIMO, prefix_len=prefix, prompt_len=ctx, ctx=ctx, kv_dtype=KvDtype.BF16)
    assert got.shared_tokens_by_kind == {"sliding": sliding, "full": prefix}


def test_refusals_name_the_device() -> None:
    named = Device(total_memory_bytes=192 * GIB, name="AMD Instinct MI300X", platform="rocm")
    with pytest.raises(UnsupportedArchitecture, match="for AMD Instinct MI300X"):
        get_engine("sglang", "0.5.23", EngineContext(device=named)).check_supported(MIMO)
    with pytest.raises(UnsupportedArchitecture, match="for this device"):
        _engine("0.5.23", None, "rocm").check_supported(MIMO)
