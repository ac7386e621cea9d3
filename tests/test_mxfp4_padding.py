"""gpt-oss's MXFP4 experts as vLLM loads them (kvsize/budget.py vllm_mxfp4_padding): the MoE kernel pads
intermediate_size / tp and hidden_size, and may widen the biases or keep the scales twice.

Worked by hand from vLLM's source (quantization/mxfp4.py Mxfp4MoEMethod.create_weights and get_mxfp4_backend,
fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size, utils/mxfp4_utils.py _swizzle_mxfp4;
read in the 0.10.1-0.34.0 sdists). One layer's tensors: w13 (E, 2I, H/2) and w2 (E, H, I/2) uint8, scales
(E, 2I, H/32) and (E, H, I/32) e8m0, biases (E, 2I) and (E, H). The published 0.10.1.1 log on 4 x A100 80GB
(tests/data/logs/vllm-dennislee22-a100-80gb-gpt-oss-120b-tp4-ray.log) loads 17.2217 GiB per rank.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from tiny_configs import registry_config

from kvsize.budget import vllm_mxfp4_padding
from kvsize.config import parse_config
from kvsize.engines.context import Device
from kvsize.engines.vllm_releases import VLLM_RELEASES
from kvsize.profiles import resolve_gpu
from kvsize.spec import ArchSpec

GIB = 1024**3


def _spec(hub_id: str) -> ArchSpec:
    return parse_config(registry_config(hub_id))


def _padding(spec: ArchSpec, version: str, gpu: str, tp: int = 1) -> tuple[int, str]:
    rules = VLLM_RELEASES.resolve(version).era.rules
    return vllm_mxfp4_padding(spec, rules, Device.from_profile(resolve_gpu(gpu)), tp, 1)


# gpt-oss-120b: 36 layers, 128 experts, hidden 2880, intermediate 2880. The checkpoint's layer: w13 128 x 5,760 x
# 1,440 = 1,061,683,200 B, w2 128 x 2,880 x 1,440 = 530,841,600, scales 128 x (5,760 x 90 + 2,880 x 90) =
# 99,532,800, bf16 biases 128 x 8,640 x 2 = 2,211,840: 1,694,269,440 B; x 36 / 4 = 15,248,424,960 per tp-4 rank.
STORED_120B_TP4 = 36 * 1_694_269_440 // 4


def test_marlin_on_an_a100_pads_to_128_and_256() -> None:
    # Marlin (sm_80): I 720 -> 768, H 2880 -> 3072. w13 128 x 1,536 x 1,536 = 301,989,888; w2 128 x 3,072 x 384 =
    # 150,994,944; scales 128 x (1,536 x 96 + 3,072 x 24) = 28,311,552; biases 128 x 4,608 x 2 = 1,179,648:
    # 482,476,032 B a layer, x 36 = 17,369,137,152 B: 2,120,712,192 B (1.98 GiB) over the checkpoint's share.
    padding, rule = _padding(_spec("openai/gpt-oss-120b"), "0.10.1", "a100-80gb", tp=4)
    assert padding == 36 * 482_476_032 - STORED_120B_TP4 == 2_120_712_192
    assert "Marlin" in rule and "intermediate 720 -> 768" in rule and "hidden 2880 -> 3072" in rule
    # every release: Marlin on Ampere (the Triton kernels need sm_90)
    assert _padding(_spec("openai/gpt-oss-120b"), "0.34.0", "a100-80gb", tp=4)[0] == padding


# gpt-oss-20b: 24 layers, 32 experts. Its layer: w13 265,420,800 + w2 132,710,400 + scales 24,883,200 + biases
# 552,960 = 423,567,360 B; x 24 / 2 = 5,082,808,320 per tp-2 rank.
STORED_20B_TP2 = 24 * 423_567_360 // 2


@pytest.mark.parametrize(
    ("version", "layer", "kernel"),
    [
        # 0.11: Marlin on sm_90 too (no triton_kernels in the wheel): I 1,440 -> 1,536, H -> 3,072:
        # 32 x (3,072 x 1,536 + 3,072 x 768) + 32 x (3,072 x 96 + 3,072 x 48) + 32 x 6,144 x 2
        ("0.11.0", 32 * (3072 * 1536 + 3072 * 768) + 32 * (3072 * 96 + 3072 * 48) + 32 * 6144 * 2, "Marlin"),
        # 0.12-0.16 and 0.22-0.24, OAI Triton: I 1,440 -> 1,472, H kept; fp32 biases; scales twice:
        # 32 x (2,944 x 1,440 + 2,880 x 736) + 2 x 32 x (2,944 x 90 + 2,880 x 46) + 32 x 5,824 x 4
        ("0.13.0", 32 * (2944 * 1440 + 2880 * 736) + 2 * 32 * (2944 * 90 + 2880 * 46) + 32 * 5824 * 4, "Triton"),
        ("0.24.0", 32 * (2944 * 1440 + 2880 * 736) + 2 * 32 * (2944 * 90 + 2880 * 46) + 32 * 5824 * 4, "Triton"),
        # 0.17-0.21: triton_kernels 3.6 pads each weight row to 64 bytes: 1,440 -> 1,472, 736 -> 768
        ("0.19.0", 32 * (2944 * 1472 + 2880 * 768) + 2 * 32 * (2944 * 90 + 2880 * 46) + 32 * 5824 * 4, "Triton"),
        # 0.25+: the original scales freed
        ("0.25.0", 32 * (2944 * 1440 + 2880 * 736) + 32 * (2944 * 90 + 2880 * 46) + 32 * 5824 * 4, "Triton"),
    ],
)
def test_hopper_by_release(version: str, layer: int, kernel: str) -> None:
    padding, rule = _padding(_spec("openai/gpt-oss-20b"), version, "h100", tp=2)
    assert padding == 24 * layer - STORED_20B_TP2
    assert kernel in rule
    # the rule names what it counts: the kept scales only where they are kept (0.12-0.24 on Triton)
    assert ("original scales kept" in rule) == (version in ("0.13.0", "0.24.0", "0.19.0"))
    assert ("fp32 biases" in rule) == (kernel == "Triton")


def test_aligned_experts_need_no_padding() -> None:
    # An MXFP4 MoE whose widths are already multiples of Marlin's 128 / 256 (hidden and intermediate 3,072 at tp 1
    # on an A100): the loaded tensors are the checkpoint's, nothing is added and no rule is said.
    raw = {**registry_config("openai/gpt-oss-20b"), "hidden_size": 3072, "intermediate_size": 3072}
    assert _padding(parse_config(raw), "0.19.0", "a100-80gb") == (0, "")


def test_experts_counted_under_either_key() -> None:
    # num_local_experts (gpt-oss) or num_experts (other MoE configs) give the experts per layer
    raw = dict(registry_config("openai/gpt-oss-20b"))
    raw["num_experts"] = raw.pop("num_local_experts")
    assert parse_config(raw).mxfp4_experts == 32


def test_b200_flashinfer_pads_to_256_then_128() -> None:
    # FlashInfer TRT-LLM (sm_10x), 120b at tp 1: H -> 3,072; I 2,880 -> 3,072 through 0.26, -> 2,944 from 0.27;
    # fp32 biases. Stored: 36 x 1,694,269,440.
    spec = _spec("openai/gpt-oss-120b")

    def layer(i: int) -> int:
        return 128 * (2 * i * 1536 + 3072 * i // 2) + 128 * (2 * i * 96 + 3072 * i // 32) + 128 * (2 * i + 3072) * 4

    assert _padding(spec, "0.26.0", "b200")[0] == 36 * layer(3072) - 36 * 1_694_269_440
    assert _padding(spec, "0.27.0", "b200")[0] == 36 * layer(2944) - 36 * 1_694_269_440


def test_nothing_padded_without_mxfp4_or_a_known_card() -> None:
    raw: dict[str, Any] = {k: v for k, v in registry_config("openai/gpt-oss-20b").items() if k != "quantization_config"}
    bf16 = parse_config(raw)  # a bf16 re-export: no MXFP4 kernel
    assert bf16.mxfp4_experts is None
    assert _padding(bf16, "0.19.0", "h100", tp=2) == (0, "")
    spec = _spec("openai/gpt-oss-20b")
    assert spec.mxfp4_experts == 32
    rules = VLLM_RELEASES.resolve("0.19.0").era.rules
    assert vllm_mxfp4_padding(spec, rules, None, 2, 1) == (0, "")
    assert vllm_mxfp4_padding(spec, rules, Device(80 * GIB), 2, 1) == (0, "")  # no capability known
    assert vllm_mxfp4_padding(spec, rules, Device.from_profile(resolve_gpu("mi300x")), 2, 1) == (0, "")


def test_the_published_a100_load() -> None:
    # kvsize's weights per rank for the A100 log: the published size split over 4, + the Marlin padding, + RoPE,
    # within 0.5% of the logged 17.2217 GiB (17.17; 15.19 GiB, -11.8%, without the padding): the rest is replicated
    # routers and norms and the Marlin workspace.
    from pathlib import Path

    from kvsize.calibration import Deployment, check_log
    from kvsize.engine_log import parse_log
    from kvsize.resolve import load_model_config
    from kvsize.weights import find_weights

    text = (Path(__file__).parent / "data/logs/vllm-dennislee22-a100-80gb-gpt-oss-120b-tp4-ray.log").read_text()
    log = parse_log(text)
    assert log is not None
    loaded = load_model_config("openai/gpt-oss-120b")
    spec = parse_config(loaded.raw)
    profile = resolve_gpu("a100-80gb")
    dep = Deployment(
        spec=spec,
        memory_bytes=profile.memory_bytes,
        device=Device.from_profile(profile),
        weights_bytes=find_weights(loaded).bytes,
        tp=4,
    )
    weights = next(f for f in check_log(log, dep).figures if f.name == "weights per rank")
    assert weights.logged == 17.2217 and abs(weights.error_pct) < 0.5
    assert weights.basis == "kvsize's padded weights + RoPE tables"
    # weights measured on this rank (a calibration) are the load as it was: nothing is added to them
    from kvsize.calibration import calibration_from_log

    measured = calibration_from_log(log, gpu="a100-80gb", model="openai/gpt-oss-120b", source="t")
    again = msgspec.structs.replace(dep, calibration=measured, gpu_id="a100-80gb", model_id="openai/gpt-oss-120b")
    weights = next(f for f in check_log(log, again).figures if f.name == "weights per rank")
    assert weights.predicted == pytest.approx(17.2217, abs=0.005) and "padded" not in weights.basis
