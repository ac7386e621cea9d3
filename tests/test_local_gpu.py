"""`--gpu auto`: this machine's GPUs read through NVML, nvidia-smi, amdsmi, rocm-smi or torch (kvsize/local_gpu.py).

No GPU is needed: a stand-in `nvidia-smi` / `rocm-smi` on PATH prints what the real tool printed on a real machine
(tests/data/local_gpu/, sources in its SOURCES.md), and a fake `pynvml` module stands in for nvidia-ml-py. Every
memory figure is worked by hand from the tool's output (MiB x 1,048,576) and the GPU profiles.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvsize import local_gpu
from kvsize.cli import app
from kvsize.config import parse_config
from kvsize.engines import get_engine
from kvsize.profiles import resolve_gpu

DATA = Path(__file__).parent / "data" / "local_gpu"
MIB = 1024 * 1024
CAT = shutil.which("cat")  # found before a test narrows PATH to its stand-ins
LLAMA_8B = "meta-llama/Llama-3.1-8B"
runner = CliRunner()

NO_GPU_TRIED = (
    "tried NVML (nvidia-ml-py not installed), nvidia-smi (not on PATH), amdsmi (amdsmi not installed), "
    "rocm-smi (not on PATH), torch (not installed)"
)


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A machine with no GPU tool at all: PATH holds only the returned folder (where a test puts its stand-in
    tools), and pynvml, amdsmi and torch cannot be imported. Detection is re-read for each test."""
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.setenv("PATH", str(tools))
    for module in ("pynvml", "amdsmi", "torch"):
        monkeypatch.setitem(sys.modules, module, None)  # `import x` raises ImportError; find_spec gives None
    local_gpu.detect.cache_clear()
    yield tools
    local_gpu.detect.cache_clear()


def standin(tools: Path, tool: str, fixture: str | None = None, *, exit_code: int = 0, stderr: str = "") -> None:
    """A stand-in `tool` on PATH printing `fixture` (a file of tests/data/local_gpu) and exiting `exit_code`."""
    lines = ["#!/bin/sh"]
    if fixture is not None:
        lines.append(f"'{CAT}' '{DATA / fixture}'")
    if stderr:
        lines.append(f'echo "{stderr}" >&2')
    lines.append(f"exit {exit_code}")
    script = tools / tool
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    script.chmod(0o755)


def fake_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, devices: list[tuple[Any, int]]) -> None:
    """A `pynvml` module on sys.path answering as nvidia-ml-py does: nvmlDeviceGetName (bytes before
    nvidia-ml-py 11.515, str since) and nvmlDeviceGetMemoryInfo(...).total in bytes."""
    folder = tmp_path / "fake_nvml"
    folder.mkdir()
    (folder / "pynvml.py").write_text(
        "import types\n"
        f"DEVICES = {devices!r}\n"
        "def nvmlInit(): pass\n"
        "def nvmlShutdown(): pass\n"
        "def nvmlDeviceGetCount(): return len(DEVICES)\n"
        "def nvmlDeviceGetHandleByIndex(i): return i\n"
        "def nvmlDeviceGetName(h): return DEVICES[h][0]\n"
        "def nvmlDeviceGetMemoryInfo(h): return types.SimpleNamespace(total=DEVICES[h][1], free=0, used=0)\n",
        encoding="utf-8",
    )
    monkeypatch.delitem(sys.modules, "pynvml")
    monkeypatch.syspath_prepend(str(folder))


def run(*args: str) -> Any:
    return runner.invoke(app, list(args))


def size_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = run(LLAMA_8B, "--ctx", "32k", *args, "--json")
    assert result.exit_code == code, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


# --- the tools' outputs ---------------------------------------------------------------------------------------


def test_nvidia_smi_eight_h100s_are_the_h100_sxm_profile(machine: Path) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_h100x8.txt")
    found = local_gpu.detect()
    assert found.source == "nvidia-smi" and len(found.gpus) == 8
    # 81559 MiB x 1,048,576 = 85,520,809,984 B: what gpu_profiles/h100-sxm.yaml records, so the profile as is.
    assert found.gpus[0].memory_bytes == 81559 * MIB == 85_520_809_984
    assert local_gpu.local_profile() == resolve_gpu("h100-sxm")
    auto, named = size_json("--gpu", "auto"), size_json("--gpu", "h100")
    assert auto["scenarios"] == named["scenarios"]  # the same card: every figure the same
    assert auto["scenarios"][0]["gpu"]["memory_bytes"] == 85_520_809_984
    assert "--gpu auto: 8 x NVIDIA H100 80GB HBM3 (nvidia-smi) is h100-sxm" in auto["notes"]
    assert "--gpu auto: figures are per GPU; 8 GPUs allow --tp up to 8" in auto["notes"]


def test_one_rtx_4090(machine: Path) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_rtx4090.txt")
    data = size_json("--gpu", "auto")
    # 24564 MiB x 1,048,576 = 25,757,220,864 B = gpu_profiles/rtx-4090.yaml memory_bytes
    assert data["scenarios"][0]["gpu"]["memory_bytes"] == 25_757_220_864
    assert data["scenarios"][0]["gpu"]["name"] == "rtx-4090"
    assert not any("per GPU" in note for note in data["notes"])  # one GPU: no tp note


def test_mixed_cards_are_refused_with_the_list(machine: Path) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_mixed.txt")
    result = run(LLAMA_8B, "--ctx", "32k", "--gpu", "auto")
    assert result.exit_code == 2
    assert "2 x NVIDIA A100-SXM4-80GB (GPU 0, 1); 2 x NVIDIA GeForce RTX 4090 (GPU 2, 3)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_card_with_no_profile_is_sized_with_its_reported_memory(machine: Path) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_p100.txt")  # kvsize has no P100 profile
    data = size_json("--gpu", "auto", code=1)  # 16 GiB: Llama-3.1-8B's weights alone do not fit
    # 16384 MiB x 1,048,576 = 17,179,869,184 B
    assert data["scenarios"][0]["gpu"]["memory_bytes"] == 16384 * MIB == 17_179_869_184
    [note] = [n for n in data["notes"] if n.startswith("--gpu auto")]
    assert "Tesla P100-PCIE-16GB (nvidia-smi) has no GPU profile; sized with the" in note
    assert "nvidia-smi reports" in note


def test_an_a40_takes_its_profile(machine: Path) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_a40.txt")  # the same 46068 MiB as the a40 profile states
    data = size_json("--gpu", "auto")
    assert data["scenarios"][0]["gpu"]["name"] == "a40"
    assert data["scenarios"][0]["gpu"]["memory_bytes"] == 46068 * MIB == 48_305_799_168


def test_a_total_the_tool_does_not_report_keeps_the_profile(machine: Path) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_gb10.txt")  # GB10: memory.total [N/A]
    profile = local_gpu.local_profile()
    assert profile.id == "dgx-spark" and profile.memory_bytes == 128_538_451_968  # the profile's own figure


def test_failing_nvidia_smi_falls_through_and_says_why(machine: Path) -> None:
    standin(
        machine,
        "nvidia-smi",
        exit_code=9,
        stderr="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    )
    standin(machine, "rocm-smi", "rocm-smi_mi300x.json")
    found = local_gpu.detect()
    assert found.source == "rocm-smi"
    assert found.tried[1].startswith("nvidia-smi (exit 9: NVIDIA-SMI has failed")


def test_rocm_smi_two_mi300x(machine: Path) -> None:
    standin(machine, "rocm-smi", "rocm-smi_mi300x.json")
    found = local_gpu.detect()
    assert [g.name for g in found.gpus] == ["AMD Instinct MI300X"] * 2
    # 206,141,652,992 B (192 GiB - 16 MiB) is what gpu_profiles/mi300x.yaml records: the profile as is
    assert local_gpu.local_profile() == resolve_gpu("mi300x")


def test_rocm_smi_consumer_card_without_a_profile(machine: Path) -> None:
    standin(machine, "rocm-smi", "rocm-smi_rx7900xt.json")
    profile = local_gpu.local_profile()
    assert profile.memory_bytes == 21_458_059_264 and profile.vendor == "AMD"
    assert profile.sources == ("rocm-smi on this machine (--gpu auto)",)


def test_no_gpu_is_exit_3_naming_what_was_tried(machine: Path) -> None:
    result = run(LLAMA_8B, "--ctx", "32k", "--gpu", "auto")
    assert result.exit_code == 3
    assert NO_GPU_TRIED in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --- NVML ------------------------------------------------------------------------------------------------------


def test_nvml_comes_first_and_bytes_names_are_decoded(
    machine: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_rtx4090.txt")  # present but never asked: NVML answers first
    fake_nvml(monkeypatch, tmp_path, [(b"NVIDIA H200", 150_754_820_096)])  # h200.yaml: 143771 MiB
    found = local_gpu.detect()
    assert found.source == "NVML" and found.gpus[0].name == "NVIDIA H200"
    assert local_gpu.local_profile() == resolve_gpu("h200")


def test_a_total_that_differs_from_the_profile_is_used_and_said(
    machine: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # RTX A6000 with ECC on: 46068 MiB (gpu_profiles/rtx-a6000.yaml memory_reported_by), where the profile
    # records 49140 MiB = 51,527,024,640 B with ECC off. The machine's own total wins: 46068 x 1,048,576.
    fake_nvml(monkeypatch, tmp_path, [("NVIDIA RTX A6000", 46068 * MIB)])
    data = size_json("--gpu", "auto")
    gpu = data["scenarios"][0]["gpu"]
    assert gpu["memory_bytes"] == 48_305_799_168 and gpu["name"] == "rtx-a6000"
    assert any("is rtx-a6000; sized with the" in n and "the profile records" in n for n in data["notes"])


# --- tp ------------------------------------------------------------------------------------------------------

# vLLM ModelConfig.verify_with_parallel_config: attention heads % tp == 0; QKVParallelLinear: KV heads % tp == 0
# when tp < KV heads, tp % KV heads == 0 when tp >= them.
LLAMA_LIKE = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 4096, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(
    ("heads", "kv", "count", "tp"),
    [
        (32, 8, 8, 8),  # Llama 3.1 8B on 8 GPUs: 32 % 8 = 0, 8 % 8 = 0
        (32, 8, 6, 4),  # 6 and 5 do not divide 32; 4 does, and 8 KV heads % 4 = 0
        (28, 4, 8, 4),  # Qwen2.5-7B: 28 % 8 = 4; 7 divides 28 but 7 % 4 KV heads = 3 (the KV rule); 4
        (28, 4, 7, 4),  # the near twin: the heads rule alone would take 7
        (40, 8, 3, 2),  # 3 does not divide 40; 2 does
    ],
)
def test_auto_tp_is_the_largest_split_vllm_accepts(heads: int, kv: int, count: int, tp: int) -> None:
    config = {**LLAMA_LIKE, "num_attention_heads": heads, "num_key_value_heads": kv, "hidden_size": heads * 128}
    spec = parse_config(config, source="test")
    assert local_gpu.auto_tp(get_engine("vllm"), spec, count) == tp


# --- driver names wherever --gpu is taken ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("AMD Instinct MI300X", "mi300x"),  # amdsmi market_name / rocminfo, without the profile's '(gfx942)'
        ("AMD Instinct MI250X/MI250", "mi250x"),  # rocminfo Marketing Name (ROCm/rocm_smi_lib issue 165)
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell"),  # one of '(A|B|C)'
    ],
)
def test_driver_names_resolve(name: str, profile: str) -> None:
    assert resolve_gpu(name).id == profile


def test_size_takes_a_driver_name() -> None:
    data = size_json("--gpu", "NVIDIA H100 80GB HBM3")
    assert data["scenarios"][0]["gpu"]["memory_bytes"] == 85_520_809_984  # 81559 MiB


def test_plan_takes_driver_names() -> None:
    result = run("plan", LLAMA_8B, "--ctx", "32k", "--gpus", "NVIDIA H100 80GB HBM3,AMD Instinct MI300X", "--json")
    assert result.exit_code == 0, result.stderr
    assert sorted(p["gpu"] for p in json.loads(result.stdout)["plans"]) == ["h100-sxm", "mi300x"]


def test_advice_runs_on_an_auto_card(machine: Path) -> None:
    # Llama 3.1 70B's bf16 weights (~131 GiB) cannot fit one RTX 4090: exit 1, and the advice (larger cards,
    # found from the detected profile) is computed without naming 'auto' as a card.
    standin(machine, "nvidia-smi", "nvidia-smi_rtx4090.txt")
    result = run("meta-llama/Llama-3.1-70B", "--ctx", "8k", "--gpu", "auto", "--json")
    assert result.exit_code == 1, result.stderr
    scenario = json.loads(result.stdout)["scenarios"][0]
    assert scenario["gpu"]["fits"] is False and scenario["gpu"]["name"] == "rtx-4090"


# --- --tp auto -------------------------------------------------------------------------------------------------


def test_tp_auto_splits_over_the_machines_gpus(machine: Path, tmp_path: Path) -> None:
    # Llama-3.1-8B: 32 attention heads, 8 KV heads (vLLM ModelConfig.verify_with_parallel_config: 32 % tp == 0;
    # QKVParallelLinear: 8 % tp == 0). 8 GPUs: 32 % 8 = 0 and 8 % 8 = 0 -> tp 8.
    standin(machine, "nvidia-smi", "nvidia-smi_h100x8.txt")
    data = size_json("--gpu", "auto", "--tp", "auto")
    assert data["scenarios"][0]["tp"] == 8
    assert "--tp auto: tp 8, the largest split of 8 GPUs vllm accepts for this model" in data["notes"]
    # 6 GPUs: 32 % 6 = 2 and 32 % 5 = 2 are refused; 32 % 4 = 0 and 8 % 4 = 0 -> tp 4
    six = tmp_path / "six.txt"
    six.write_text("".join((DATA / "nvidia-smi_h100x8.txt").read_text().splitlines(keepends=True)[:6]))
    (machine / "nvidia-smi").write_text(f"#!/bin/sh\n'{CAT}' '{six}'\n")
    local_gpu.detect.cache_clear()
    data = size_json("--gpu", "auto", "--tp", "auto")
    assert data["scenarios"][0]["tp"] == 4
    assert data == size_json("--gpu", "auto", "--tp", "4") | {"notes": data["notes"]}  # the same sizing as --tp 4


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--gpu", "h100", "--tp", "auto"], "--tp auto needs --gpu auto"),
        (["--tp", "auto"], "--tp auto needs --gpu auto"),
        (["--gpu", "auto", "--tp", "auto", "--engine", "vllm,sglang"], "--tp auto takes one --engine"),
    ],
)
def test_tp_auto_refusals(machine: Path, args: list[str], why: str) -> None:
    standin(machine, "nvidia-smi", "nvidia-smi_h100x8.txt")
    result = run(LLAMA_8B, "--ctx", "32k", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {why}") and len(result.stderr.strip().splitlines()) == 1
