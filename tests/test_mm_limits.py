"""vLLM --limit-mm-per-prompt and --skip-mm-profiling: what the profile run encodes, and which towers load.

Sources (vLLM sdists):
- the modality profiled: the one with the most tokens per item among those whose limit is above 0
  (multimodal/encoder_budget.py MultiModalBudget, 0.34.0; v1/worker/utils.py, 0.10.1.1; the nonzero modalities of
  multimodal/registry.py get_max_tokens_per_item_by_nonzero_modality, 0.8.5); none when every limit is 0 (the
  encoder budget is 0: v1/core/encoder_cache_manager.py _compute_encoder_budget_multimodal);
- the items per prompt: max(1, min(limit, max_model_len // tokens per item)) (MultiModalBudget._get_max_items);
- Qwen2-VL's video budget through 0.10.1 is max_model_len less one image only when images are counted
  (qwen2_vl.py get_num_frames_with_most_features, mm_counts = one per modality above 0);
- towers: `if multimodal_config.get_limit_per_prompt("image")` in llava.py, mllama4.py, qwen2_vl.py,
  qwen2_5_vl.py from 0.10.1 (absent in 0.10.0), gemma3_mm.py only through _mark_tower_model from 0.16.0
  (models/interfaces.py), one tower per modality set (gemma4_mm.py: {"image", "video"} and "audio");
- --skip-mm-profiling from 0.10.1 (engine/arg_utils.py; absent in 0.10.0); the dummy sizes
  ({"count": N, "width": ...}) from 0.11.1 (config/multimodal.py BaseDummyOptions; absent in 0.11.0).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_configs import registry_config
from typer.testing import CliRunner

from kvsize.budget import BudgetSettings, dropped_tower_bytes
from kvsize.cli.app import app
from kvsize.config import parse_config
from kvsize.engine_log import parse_log
from kvsize.engines.vllm_releases import VLLM_RELEASES
from kvsize.errors import UsageError
from kvsize.mm_profile import NO_LIMITS, NotModelled, mm_items, parse_mm_limits, profiled_modality, vllm_mm_profile

runner = CliRunner()
QWEN25 = "Qwen/Qwen2.5-VL-7B-Instruct"
GEMMA3 = "google/gemma-3-27b-it"


def _rules(version: str):  # type: ignore[no-untyped-def]
    return VLLM_RELEASES.resolve(version).era.rules


def _budget(model: str, version: str, *flags: str, ctx: str = "128000") -> dict:  # type: ignore[type-arg]
    args = [model, "--ctx", ctx, "--gpu", "h100", "--engine", "vllm", "--engine-version", version, "--json", *flags]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)["scenarios"][0]["gpu"]["budget"]  # type: ignore[no-any-return]


# --- the flag's value -----------------------------------------------------------------------------------------


def test_counts_and_dummy_sizes_parse() -> None:
    limits = parse_mm_limits('{"image": 2, "video": 0}')
    assert limits.counts == (("image", 2), ("video", 0)) and limits.sized == ()
    assert limits.count("image") == 2 and limits.count("video") == 0 and limits.count("audio") == 999
    sized = parse_mm_limits('{"image": {"count": 1, "width": 512}, "video": {"count": 3}}')
    assert sized.counts == (("image", 1), ("video", 3)) and sized.sized == ("image",)
    assert parse_mm_limits('{"audio": {"length": 16000}}').count("audio") == 999  # count's default
    assert sized.given == '{"image":{"count":1,"width":512},"video":{"count":3}}'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not JSON"),
        ("[1]", "non-empty JSON object"),
        ("{}", "non-empty JSON object"),
        ('{"image": -1}', "whole number from 0 to 2"),
        ('{"image": true}', "whole number from 0 to 2"),
        ('{"image": 1.5}', "whole number from 0 to 2"),
        ('{"image": 99999999999999999999}', "from 0 to 2\\^31 - 1"),
        ('{"Image": 1}', "not a modality name"),
        ('{"image": {"depth": 2}}', "image takes count, width, height, not depth"),
        ('{"audio": {"width": 3}}', "audio takes count, length, not width"),
        ('{"video": {"count": 1, "num_frames": 0}}', "sizes above 0"),
        ("{" * 5000, "longer than 4096"),
    ],
)
def test_bad_values_are_refused_naming_the_fault(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_mm_limits(text)


def test_bad_value_is_one_line_and_exit_2() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kvsize", QWEN25, "--gpu", "h100", "--limit-mm-per-prompt", '{"image": -1}'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "--limit-mm-per-prompt: image's limit must be a whole number from 0 to 2^31 - 1" in run.stderr


# --- the modality profiled -------------------------------------------------------------------------------------


def test_the_modality_each_limit_leaves() -> None:
    qwen25 = parse_config(registry_config(QWEN25)).vision_dummy
    qwen3 = parse_config(registry_config("Qwen/Qwen3-VL-8B-Instruct")).vision_dummy
    gemma = parse_config(registry_config(GEMMA3)).vision_dummy
    assert qwen25 and qwen3 and gemma
    r19, r11 = _rules("0.19.0"), _rules("0.11.0")

    def pick(dummy, rules, text):  # type: ignore[no-untyped-def]
        return profiled_modality(dummy, rules, parse_mm_limits(text) if text else NO_LIMITS)

    # Qwen2.5-VL: its video has at least the image's tokens, so it is profiled unless limited to 0
    assert pick(qwen25, r19, "") == "video"
    assert pick(qwen25, r19, '{"video": 0}') == "image"
    assert pick(qwen25, r19, '{"image": 0}') == "video"
    assert pick(qwen25, r19, '{"image": 0, "video": 0}') is None
    # Gemma 3 has images only: a video limit changes nothing
    assert pick(gemma, r19, '{"video": 0}') == "image"
    assert pick(gemma, r19, '{"image": 0}') is None
    # Qwen3-VL: 0.11.0's video (tokens x 12.5) unless limited to 0; from 0.13 the image
    assert pick(qwen3, r11, "") == "video" and pick(qwen3, r11, '{"video": 0}') == "image"
    assert pick(qwen3, r19, "") == "image" and pick(qwen3, r19, '{"image": 0, "video": 0}') is None
    with pytest.raises(NotModelled, match="Qwen3-VL's dummy video"):
        pick(qwen3, r19, '{"image": 0}')


def test_items_per_prompt_take_the_limit() -> None:
    # 4,096-token items under 65,536 batched tokens: 16 by the encoder budget; 2 sequences x the limit per prompt
    common = {"max_batched_tokens": 65_536, "max_num_seqs": 2, "max_model_len": 100_000, "ceil_budget": False}
    assert mm_items(4096, per_prompt_by_len=True, **common) == 16  # 2 x min(999, 24)
    assert mm_items(4096, per_prompt_by_len=True, limit=3, **common) == 6  # 2 x min(3, 24)
    assert mm_items(4096, per_prompt_by_len=False, limit=5, **common) == 10  # 0.8.5: 2 x 5


def test_qwen2_vl_video_budget_keeps_no_image_when_images_are_off() -> None:
    # vLLM 0.10.1, max_model_len 40,000, max_num_batched_tokens 65,536; one frame pair of the 3,584^2 image is
    # 16,384 tokens. With images counted the video's budget is 40,000 - 16,384 = 23,616: 1 pair, so 65,536 //
    # 16,384 = 4 items; with images at 0 it is 40,000: 2 pairs (32,768 tokens), 65,536 // 32,768 = 2 items. The
    # item built is the pairs that fit 65,536 batched tokens either way: 4 pairs, 8 frames.
    spec = parse_config(registry_config(QWEN25))
    assert spec.vision_dummy is not None and spec.vision_dummy.tokens_per_item == 16_384

    def profile(text: str):  # type: ignore[no-untyped-def]
        return vllm_mm_profile(
            spec,
            spec.vision_dummy,
            dtype_bytes=2,
            max_batched_tokens=65_536,
            max_num_seqs=256,
            max_model_len=40_000,
            tp=1,
            rules=_rules("0.10.1"),
            limits=parse_mm_limits(text),
        )

    with_images, without = profile('{"image": 1}'), profile('{"image": 0}')
    assert with_images is not None and without is not None
    assert (with_images.items, without.items) == (4, 2)
    assert "video of 8 frames (budgeted as 2)" in with_images.rule
    assert "video of 8 frames (budgeted as 4)" in without.rule


# --- the budget -------------------------------------------------------------------------------------------------


def test_qwen25_vl_image_profile_when_videos_are_off() -> None:
    # vLLM 0.19 on an H100 at max_model_len 128,000 (8,192 batched tokens): the image item is 65,536 patches of
    # 3 x 2 x 14 x 14 = 1,176 values (16,384 tokens); items = max(8,192, 16,384) // 16,384 = 1. Peak = inputs
    # 65,536 x 1,176 x 2 B + max(tower 65,536 x (4 x 1,280 + 4 x 3,420) x 2 B, outputs 16,384 x 3,584 x 2 B +
    # the language model's peak L), with L the --skip-mm-profiling run's (no encoder).
    skip = _budget(QWEN25, "0.19", "--skip-mm-profiling")
    image = _budget(QWEN25, "0.19", "--limit-mm-per-prompt", '{"video": 0}')
    language = skip["activation_bytes"]
    inputs, tower, outputs = 65_536 * 1_176 * 2, 65_536 * (4 * 1_280 + 4 * 3_420) * 2, 16_384 * 3_584 * 2
    assert (inputs, tower, outputs) == (154_140_672, 2_464_153_600, 117_440_512)
    assert image["activation_bytes"] == inputs + max(tower, outputs + language)
    # the vision tower still loads (images are on): 8,292,166,656 parameters x 2 B
    assert image["weights_bytes"] == skip["weights_bytes"] == 16_584_333_312
    # the default's 14-frame video is larger again
    assert _budget(QWEN25, "0.19")["activation_bytes"] > image["activation_bytes"]


def test_every_vision_modality_off_drops_the_tower_from_0_10_1() -> None:
    # Qwen2.5-VL's vision tower and merger: 676,550,144 parameters x 2 B (kvsize/params.py, modeling_qwen2_5_vl.py)
    off = ("--limit-mm-per-prompt", '{"image": 0, "video": 0}')
    for version, dropped in (("0.10.0", 0), ("0.10.1", 1_353_100_288), ("0.19", 1_353_100_288)):
        budget = _budget(QWEN25, version, *off, ctx="32768")
        assert budget["weights_bytes"] == 16_584_333_312 - dropped, version
        assert "no encoder" in budget["activation_rule"]


def test_gemma3_tower_goes_only_with_the_marked_towers_of_0_16() -> None:
    # SigLIP-so400m at 896 px (27 layers of 1,152 / 4,304: 416,866,032 parameters) and the projector's
    # 1,152 x 5,376 + 1,152 = 6,194,304: 423,060,336 x 2 B = 846,120,672 B. gemma3_mm.py builds its tower
    # whatever the limit through 0.14 and marks it (dropped at image 0) from 0.16.
    layer = 4 * (1152 * 1152 + 1152) + 2 * 2 * 1152 + (1152 * 4304 + 4304) + (4304 * 1152 + 1152)
    vision = 3 * 14 * 14 * 1152 + 1152 + 64 * 64 * 1152 + 27 * layer + 2 * 1152
    assert (vision + 1152 * 5376 + 1152) * 2 == 846_120_672
    off = ("--limit-mm-per-prompt", '{"image": 0}')
    for version in ("0.14", "0.16"):
        full, text = _budget(GEMMA3, version, ctx="32768"), _budget(GEMMA3, version, *off, ctx="32768")
        dropped = 846_120_672 if version == "0.16" else 0
        assert full["weights_bytes"] - text["weights_bytes"] == dropped, version
        assert text["activation_bytes"] < full["activation_bytes"]  # no encoder in either release


def test_one_tower_per_modality_set_gemma4_audio() -> None:
    # Gemma 4 E2B at 0.29: audio tower 307,184,384 parameters, vision 168,544,704 (kvsize/params.py). Audio at 0
    # drops the audio tower alone; image at 0 drops nothing while video is on; image and video at 0 drop vision.
    raw = registry_config("google/gemma-4-E2B-it")
    spec = parse_config(raw)
    towers, audio = (168_544_704 + 307_184_384) * 2, 307_184_384 * 2
    rules = _rules("0.29.0")

    def dropped(text: str) -> int:
        s = BudgetSettings(tower_bytes=towers, audio_tower_bytes=audio, mm_limits=parse_mm_limits(text))
        return dropped_tower_bytes(spec, rules, s)[0]

    assert dropped('{"audio": 0}') == 614_368_768
    assert dropped('{"image": 0}') == 0
    assert dropped('{"image": 0, "video": 0}') == 337_089_408
    assert dropped('{"image": 0, "video": 0, "audio": 0}') == towers
    # 0.14: Gemma 4 is no family that drops its tower
    s = BudgetSettings(tower_bytes=towers, audio_tower_bytes=audio, mm_limits=parse_mm_limits('{"audio": 0}'))
    assert dropped_tower_bytes(spec, _rules("0.14.0"), s)[0] == 0


def test_qwen3_vl_video_only_is_flagged() -> None:
    result = runner.invoke(
        app,
        ["Qwen/Qwen3-VL-8B-Instruct", "--ctx", "32768", "--gpu", "h100", "--engine-version", "0.19", "--json",
         "--limit-mm-per-prompt", '{"image": 0}'],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.stderr
    out = json.loads(result.stdout)
    assert any("Qwen3-VL's dummy video" in n and "language model only" in n for n in out["notes"])
    budget = out["scenarios"][0]["gpu"]["budget"]
    assert budget["activation_bytes"] == _budget("Qwen/Qwen3-VL-8B-Instruct", "0.19", "--skip-mm-profiling",
                                                 ctx="32768")["activation_bytes"]  # fmt: skip


def test_a_dummy_size_is_flagged_as_a_lower_bound() -> None:
    result = runner.invoke(
        app,
        [QWEN25, "--ctx", "32768", "--gpu", "h100", "--engine-version", "0.19", "--json",
         "--limit-mm-per-prompt", '{"video": {"count": 1, "num_frames": 4}}'],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.stderr
    notes = json.loads(result.stdout)["notes"]
    assert any("video dummy's size from --limit-mm-per-prompt is not modelled" in n for n in notes)


@pytest.mark.parametrize(
    ("version", "flags", "says"),
    [
        ("0.10.0", ["--skip-mm-profiling"], "--skip-mm-profiling was added in vLLM 0.10.1"),
        ("0.11.0", ["--limit-mm-per-prompt", '{"image": {"count": 1, "width": 64}}'],
         "A dummy size in --limit-mm-per-prompt was added in vLLM 0.11.1"),
    ],
)  # fmt: skip
def test_flags_refused_before_their_release(version: str, flags: list[str], says: str) -> None:
    result = runner.invoke(app, [QWEN25, "--gpu", "h100", "--engine-version", version, *flags])
    assert result.exit_code == 2
    assert says in " ".join(result.stderr.split())
    # a bare count is older than both
    assert runner.invoke(app, [QWEN25, "--gpu", "h100", "--engine-version", "0.8.5", "--limit-mm-per-prompt",
                               '{"video": 0}']).exit_code in (0, 1)  # fmt: skip


def test_launch_command_repeats_them() -> None:
    args = [QWEN25, "--ctx", "32768", "--gpu", "h100", "--emit", "vllm"]
    out = runner.invoke(app, [*args, "--limit-mm-per-prompt", '{"video": 0}', "--skip-mm-profiling"]).stdout
    assert "--limit-mm-per-prompt" in out and '{"video":0}' in out and "--skip-mm-profiling" in out
    plain = runner.invoke(app, args).stdout
    assert "--limit-mm-per-prompt" not in plain and "--skip-mm-profiling" not in plain


def test_text_model_ignores_them() -> None:
    # vLLM builds no MultiModalConfig for a text model (config/model.py), so the flags change nothing
    args = ["meta-llama/Llama-3.1-8B", "--ctx", "8192", "--gpu", "h100", "--json"]
    plain = json.loads(runner.invoke(app, args).stdout)["scenarios"][0]["gpu"]["budget"]
    limited = runner.invoke(app, [*args, "--limit-mm-per-prompt", '{"image": 0}', "--skip-mm-profiling"])
    assert json.loads(limited.stdout)["scenarios"][0]["gpu"]["budget"] == plain


# --- a start-up log ---------------------------------------------------------------------------------------------


def test_log_args_are_read() -> None:
    text = (
        "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.19.0\n"
        "INFO 05-01 10:00:00 [utils.py:1] non-default args: {'model': 'Qwen/Qwen2.5-VL-7B-Instruct', "
        "'limit_mm_per_prompt': {'video': 0, 'image': {'count': 2, 'width': 512}}, 'skip_mm_profiling': True}\n"
    )
    settings = parse_log(text).settings
    assert settings["limit_mm_per_prompt"] == '{"video":0,"image":{"count":2,"width":512}}'
    assert settings["skip_mm_profiling"] is True
    bad = text.replace("'video': 0", "'video': -3")
    assert "limit_mm_per_prompt" not in parse_log(bad).settings


# --- a capacity file --------------------------------------------------------------------------------------------

CAPACITY = """deployments:
  - name: vl
    model: Qwen/Qwen2.5-VL-7B-Instruct
    gpu: h100
    engine_version: "0.19"
    {switches}
    require: {{ctx: 32768, min_concurrency: 1}}
"""


def _check(tmp_path, switches: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    path = tmp_path / "capacity.yaml"
    path.write_text(CAPACITY.format(switches=switches))
    result = runner.invoke(app, ["check", str(path), "--json"])
    return result.exit_code, result.stdout, result.stderr


def test_capacity_file_takes_the_switches_as_the_cli_does(tmp_path) -> None:  # type: ignore[no-untyped-def]
    switches = "limit_mm_per_prompt: {image: 0, video: 0}\n    enforce_eager: true\n    skip_mm_profiling: true"
    code, out, err = _check(tmp_path, switches)
    assert code == 0, err
    checked = json.loads(out)["deployments"][0]
    cli = _budget(QWEN25, "0.19", "--limit-mm-per-prompt", '{"image":0,"video":0}', "--enforce-eager",
                  "--skip-mm-profiling", ctx="32768")  # fmt: skip
    assert checked["kv_budget_bytes"] == cli["kv_budget_bytes"]
    assert checked["weights_bytes"] == 16_584_333_312 - 1_353_100_288  # the tower not loaded
    plain = json.loads(_check(tmp_path, "")[1])["deployments"][0]
    assert plain["weights_bytes"] == 16_584_333_312


@pytest.mark.parametrize(
    ("switches", "says"),
    [
        ('enforce_eager: "yes"', "line 6: field 'deployments.0.enforce_eager': must be true or false"),
        ("limit_mm_per_prompt: {video: -2}", "line 6: field 'deployments.0.limit_mm_per_prompt': video's limit"),
        ("limit_mm_per_prompt: [1]", "deployments.0.limit_mm_per_prompt': must be a JSON object or a mapping"),
    ],
)
def test_capacity_file_refuses_a_bad_switch_with_its_line(tmp_path, switches: str, says: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = _check(tmp_path, switches)
    assert code == 2 and "Traceback" not in err
    assert says in " ".join(err.split())


# --- round 20 (the lines of this change) -----------------------------------------------------------------------


def test_kvsize_log_drops_the_audio_tower_alone() -> None:
    # The T4 log (vLLM 0.29: every marked tower, one per modality set) with `{"audio": 0}` in its args: the weights
    # figure drops Gemma 4 E2B's audio tower, 307,184,384 x 2 B at fp16, not the vision tower. A deployment that
    # states no audio share drops nothing.
    from kvsize.calibration import Deployment, check_log
    from kvsize.engines.context import Device
    from kvsize.profiles import resolve_gpu
    from kvsize.weights import tower_bytes

    text = (Path(__file__).parent / "data/logs/vllm-xbill9-t4-gemma-4-e2b-qat-w4a16.log").read_text()
    limited = text.replace("'max_num_seqs': 8}", "'max_num_seqs': 8, 'limit_mm_per_prompt': {'audio': 0}}")
    assert limited != text
    raw = registry_config("google/gemma-4-E2B-it")
    profile = resolve_gpu("t4")
    towers, audio = tower_bytes(raw, "fp16"), tower_bytes(raw, "fp16", ("audio",))
    assert audio == 307_184_384 * 2

    def weights(log_text: str, **shares: int) -> float:
        dep = Deployment(
            spec=parse_config(raw),
            memory_bytes=profile.memory_bytes,
            device=Device.from_profile(profile),
            weights_bytes=10 * 2**30,
            max_model_len=16384,
            **shares,  # type: ignore[arg-type]
        )
        log = parse_log(log_text)
        assert log is not None
        return next(f for f in check_log(log, dep).figures if f.name == "weights per rank").predicted

    plain = weights(text, tower_bytes=towers, audio_tower_bytes=audio)
    assert round((plain - weights(limited, tower_bytes=towers, audio_tower_bytes=audio)) * 2**30) == audio
    assert round((weights(text, tower_bytes=towers) - weights(limited, tower_bytes=towers)) * 2**30) == 0


def test_a_text_model_takes_no_tower_note() -> None:
    args = ["meta-llama/Llama-3.1-8B", "--ctx", "8192", "--gpu", "h100", "--json"]
    notes = json.loads(runner.invoke(app, args).stdout)["notes"]
    assert not any("no tower counted" in n for n in notes)


# --- what the flags cannot act on (a hostile review's findings) ----------------------------------------------


def test_vllm_switches_under_another_engine_say_so() -> None:
    args = [QWEN25, "--ctx", "32768", "--gpu", "h100", "--engine", "sglang", "--json"]
    notes = json.loads(runner.invoke(app, [*args, "--skip-mm-profiling"]).stdout)["notes"]
    assert "SGLang: --skip-mm-profiling is a vLLM flag: it changes nothing here" in notes
    both = json.loads(runner.invoke(app, [*args, "--enforce-eager", "--limit-mm-per-prompt", '{"video": 0}']).stdout)
    assert "SGLang: --enforce-eager, --limit-mm-per-prompt are vLLM flags: they change nothing here" in both["notes"]


def test_a_text_model_neither_takes_nor_emits_the_multimodal_flags() -> None:
    # vLLM builds no multimodal config for a text model; older releases raised on the flag ("limit_mm_per_prompt
    # is only supported for multimodal models"), so the launch command leaves it out
    args = ["meta-llama/Llama-3.1-8B", "--ctx", "8192", "--gpu", "h100", "--limit-mm-per-prompt", '{"image": 0}']
    notes = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["notes"]
    assert any("a text model has no multimodal inputs" in n for n in notes)
    emitted = runner.invoke(app, [*args, "--emit", "vllm"]).stdout
    assert "--limit-mm-per-prompt" not in emitted.split("\n")[0] and "a text model has no encoder" in emitted


def test_a_modality_the_model_does_not_take_is_named() -> None:
    # multimodal/processing/context.py allowed_mm_limits reads the model's own modalities only: "videos" is ignored
    out = json.loads(runner.invoke(app, [QWEN25, "--ctx", "128000", "--gpu", "h100", "--json",
                                         "--limit-mm-per-prompt", '{"videos": 0}']).stdout)  # fmt: skip
    assert any("takes image, video, not videos" in n for n in out["notes"])
    plain = _budget(QWEN25, "0.34")
    assert out["scenarios"][0]["gpu"]["budget"]["activation_bytes"] == plain["activation_bytes"]


def test_capacity_file_null_switch_is_not_given(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = _check(tmp_path, "enforce_eager: null")
    assert code == 0, err
    assert (
        json.loads(out)["deployments"][0]["kv_budget_bytes"]
        == json.loads(_check(tmp_path, "")[1])["deployments"][0]["kv_budget_bytes"]
    )
