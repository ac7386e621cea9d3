"""`--emit ENGINE`: the engine's own launch command, checked flag by flag against each release's parser.

The flag lists (kvsize/data/engine_flags/*.json) were read from each release's source; the facts pinned below were
read by hand in those sources (file and release named), so a broken extraction fails here.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvsize.cli import app
from kvsize.dtypes import KvDtype
from kvsize.launch import (
    EMIT_ENGINES,
    LLAMACPP_TREES,
    LaunchScenario,
    _releases,
    launch_command,
    release_flags,
)

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

runner = CliRunner()
CONFIG = Path(__file__).resolve().parent.parent / "examples" / "configs" / "acme-chat-3b" / "config.json"


def _scenario(**changes: object) -> LaunchScenario:
    base: dict[str, object] = {
        "model": "org/model",
        "ctx": 32768,
        "batch": 16,
        "kv_dtype": KvDtype.FP8_E4M3,
        "model_dtype": "bf16",
        "tp": 4,
        "pp": 2,
        "utilization": 0.92,
        "max_num_seqs": 16,
        "max_num_batched_tokens": 8192,
        "block_size": 16,
        "prefix_caching": False,
        "quant_method": "fp8",
        "revision": "main",
        "flash_attn": True,
        "kv_unified": True,
        "swa_full": True,
        "n_ubatch": 512,
        "n_batch": 2048,
    }
    base.update(changes)
    return LaunchScenario(**base)  # type: ignore[arg-type]


def _check_against_parser(engine: str, release: str, era: str | None, scenario: LaunchScenario) -> None:
    """Every flag of the emitted argv is in the release's list; every value with choices is one of them."""
    launch = launch_command(engine, release, era, scenario)
    flags = release_flags(engine, release, era)
    argv = launch.argv
    start = {"vllm": 3, "sglang": 3, "llamacpp": 1, "trtllm": 2}[engine]  # program (+ subcommand, model)
    for i, arg in enumerate(argv[start:], start):
        if arg.startswith("-") and argv[i - 1] not in ("--hf-overrides", "--revision"):
            assert arg in flags.flags, (engine, release, arg)
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if arg in flags.choices and nxt is not None and not nxt.startswith("-"):
                assert nxt in flags.choices[arg], (engine, release, arg, nxt)
    assert shlex.split(launch.line) == list(argv)


@pytest.mark.parametrize("release", list(_releases("vllm")))
def test_vllm_every_release_emits_only_its_flags(release: str) -> None:
    _check_against_parser("vllm", release, None, _scenario())
    _check_against_parser("vllm", release, None, _scenario(kv_memory_bytes=20 * 1024**3, prefix_caching=True))


@pytest.mark.parametrize("release", list(_releases("sglang")))
def test_sglang_every_release_emits_only_its_flags(release: str) -> None:
    _check_against_parser("sglang", release, None, _scenario())
    _check_against_parser("sglang", release, None, _scenario(kv_dtype=KvDtype.NVFP4))


@pytest.mark.parametrize("era", sorted(LLAMACPP_TREES))
def test_llamacpp_every_tree_emits_only_its_flags(era: str) -> None:
    for dtype in (KvDtype.Q8_0, KvDtype.BF16):
        _check_against_parser("llamacpp", "b1", era, _scenario(kv_dtype=dtype, model="org/model-GGUF"))


def test_trtllm_emits_only_serve_flags() -> None:
    _check_against_parser("trtllm", "1.2.0", "1.2.0", _scenario())


# --- facts read by hand in the sources ----------------------------------------------------------------------


def test_vllm_lists_pin_what_the_sources_say() -> None:
    # vllm/engine/arg_utils.py: --kv-cache-memory-bytes is added in 0.10.2 (absent from 0.10.1.1's add_cli_args);
    # --kv-cache-dtype-skip-layers in 0.19.0; CacheConfig.enable_prefix_caching is a bool field, so get_kwargs gives
    # BooleanOptionalAction: --no-enable-prefix-caching in every release.
    v = _releases("vllm")
    assert "--kv-cache-memory-bytes" not in v["0.10.1.1"].flags
    assert "--kv-cache-memory-bytes" in v["0.10.2"].flags
    assert "--kv-cache-dtype-skip-layers" not in v["0.18.1"].flags
    assert "--kv-cache-dtype-skip-layers" in v["0.19.0"].flags
    assert all("--no-enable-prefix-caching" in r.flags for r in v.values())
    # config.py CacheDType@0.8.5 = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]: no bfloat16 KV yet.
    assert v["0.8.5"].choices["--kv-cache-dtype"] == ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
    assert "nvfp4" in v["0.33.0"].choices["--kv-cache-dtype"]


def test_sglang_llamacpp_lists_pin_what_the_sources_say() -> None:
    s = _releases("sglang")
    # server_args.py --kv-cache-dtype choices: bf16 from 0.5.4; fp4_e2m1 from 0.5.5, renamed nvfp4 (0.5.16) and
    # dropped in 0.5.21; --tp-size (alias --tensor-parallel-size) in every release.
    assert "bf16" not in s["0.5.3"].choices["--kv-cache-dtype"]
    assert "bf16" in s["0.5.4"].choices["--kv-cache-dtype"]
    assert "fp4_e2m1" in s["0.5.20"].choices["--kv-cache-dtype"]
    assert "fp4_e2m1" not in s["0.5.21"].choices["--kv-cache-dtype"]
    assert all({"--tp-size", "--tensor-parallel-size"} <= r.flags for r in s.values())
    ll = _releases("llamacpp")
    # common/arg.cpp: -fa is a switch ([](common_params & params)) in the 0.3.16 tree and takes on|off|auto in the
    # 0.3.20 tree; -kvu / --kv-unified first appears in the 0.3.16 tree.
    assert "-fa" in ll["0.3.16"].bare and "-fa" not in ll["0.3.20"].bare
    assert "-kvu" not in ll["0.3.9"].flags and "-kvu" in ll["0.3.16"].flags


def test_release_between_read_releases_takes_flags_both_accept() -> None:
    # 0.15.x has no sdist read: 0.14.1 and 0.16.0 bracket it.
    flags = release_flags("vllm", "0.15.1")
    v = _releases("vllm")
    assert flags.flags == v["0.14.1"].flags & v["0.16.0"].flags
    assert flags.note is not None and "0.14.1" in flags.note
    newer = release_flags("vllm", "0.40.0")
    assert newer.flags == v["0.34.0"].flags and newer.note is not None


def test_left_out_settings_are_notes() -> None:
    # 0.8.5 has no --kv-cache-memory-bytes and no --kv-cache-dtype-skip-layers: both left out, each with a note.
    launch = launch_command(
        "vllm", "0.8.5", None, _scenario(kv_memory_bytes=1 << 34, kv_cache_dtype_skip_layers="sliding_window")
    )
    assert "--kv-cache-memory-bytes" not in launch.argv
    assert any("--kv-cache-memory-bytes" in n for n in launch.notes)
    assert any("--kv-cache-dtype-skip-layers" in n for n in launch.notes)


def test_quantization_only_for_a_quantized_checkpoint() -> None:
    assert "--quantization" not in launch_command("vllm", "0.33.0", None, _scenario(quant_method=None)).argv
    argv = launch_command("vllm", "0.33.0", None, _scenario(quant_method="fp8")).argv
    assert argv[argv.index("--quantization") + 1] == "fp8"
    online = launch_command("vllm", "0.33.0", None, _scenario(quant_method=None, weights_dtype="fp8")).argv
    assert online[online.index("--quantization") + 1] == "fp8"  # vLLM's online fp8 serves fp8-counted weights


# --- the CLI, values worked by hand ---------------------------------------------------------------------------


def test_cli_vllm_values_are_the_scenario_sized() -> None:
    result = runner.invoke(
        app,
        ["meta-llama/Llama-3.1-8B", "--gpu", "h100", "--tp", "4", "--ctx", "32k", "--batch", "16"]
        + ["--kv-dtype", "fp8", "--emit", "vllm", "--json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    argv = data["launch"]["argv"]
    value = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert value["--tensor-parallel-size"] == "4"
    assert value["--max-model-len"] == "32768"  # 32k = 32 x 1024
    assert value["--max-num-seqs"] == "16"  # the batch
    # vllm-0.33.0/vllm/config/cache.py: gpu_memory_utilization default 0.92, the figure the budget used.
    assert value["--gpu-memory-utilization"] == "0.92"
    assert data["scenarios"][0]["gpu"]["budget"]["utilization"] == 0.92
    assert value["--kv-cache-dtype"] == "fp8_e4m3"
    assert value["--dtype"] == "bfloat16"
    assert "--quantization" not in argv  # a bf16 checkpoint
    for flag in (a for a in argv[3:] if a.startswith("-")):
        assert flag in _releases("vllm")["0.33.0"].flags


def test_cli_text_is_one_line_and_notes() -> None:
    result = runner.invoke(
        app,
        ["meta-llama/Llama-3.1-8B", "--gpu", "h100", "--ctx", "32k", "--batch", "16", "--kv-dtype", "fp8"]
        + ["--emit", "vllm", "--engine-version", "0.15.0"],
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("vllm serve meta-llama/Llama-3.1-8B ")
    assert "--gpu-memory-utilization 0.9 " in lines[0]  # vllm-0.14.1 .. 0.19.1 config/cache.py: default 0.9
    assert all(line.startswith("# note: ") for line in lines[1:]) and len(lines) > 1
    assert "\x1b" not in result.stdout


def test_cli_no_fit_emits_nothing() -> None:
    result = runner.invoke(
        app, ["meta-llama/Llama-3.1-8B", "--gpu", "l4", "--ctx", "128k", "--batch", "16", "--emit", "sglang"]
    )
    assert result.exit_code == 1
    assert "sglang.launch_server" not in result.stdout


def test_cli_quantized_checkpoint_gets_its_method(tmp_path: Path) -> None:
    config = json.loads(CONFIG.read_text())
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = runner.invoke(
        app, [str(tmp_path / "config.json"), "--gpu", "h100", "--ctx", "8k", "--batch", "4", "--emit", "vllm"]
    )
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.stdout.splitlines()[0])
    assert argv[argv.index("--quantization") + 1] == "fp8"
    assert argv[2] == str(tmp_path / "config.json")


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--ctx", "8k,32k"], "one --ctx"),
        (["--ctx", "8k", "--engine", "sglang"], "--engine"),
        (["--ctx", "8k", "--no-gpu"], "a card"),
    ],
)
def test_cli_emit_refusals(args: list[str], why: str) -> None:
    gpu = [] if "--no-gpu" in args else ["--gpu", "h100"]
    args = [a for a in args if a != "--no-gpu"]
    result = runner.invoke(app, ["meta-llama/Llama-3.1-8B", *gpu, *args, "--emit", "vllm"])
    assert result.exit_code == 2
    assert why in result.stderr


def test_every_engine_is_emittable() -> None:
    assert set(EMIT_ENGINES) == {"vllm", "sglang", "llamacpp", "trtllm"}
