"""--bench-result: a serving benchmark's measured figures beside kvsize's bounds of the load it ran (issue 21),
and the --plot panel of decode speed against context.

The payloads are written with the tools' own keys and print formats:
- vLLM 0.33.0 vllm/benchmarks/serve.py: benchmark() `result` keys, main() `model_id` / `max_concurrency`, and the
  summary printed with "{:<40} {:<10}" / "{:<40} {:<10.2f}"; vLLM 0.8.5 benchmarks/benchmark_serving.py printed
  "Maximum request concurrency: N" on its own line before the banner.
- SGLang 0.5.9 sglang/bench_serving.py run_benchmark: the JSON-lines `result` (with its measured mean
  `concurrency`) and the same "{:<40}" summary ("Max request concurrency:", "Concurrency:").

Hand-worked figures (H100 SXM profile: 3.35e12 B/s, 989e12 FLOP/s bf16), Llama-3.1-8B bf16:
- weights on the GPU: 16,060,522,496 B (the registry's published safetensors size); 131,072 B of KV per token
  (2 x 32 layers x 8 heads x 128 x 2 B); 8,030,261,248 parameters.
- vLLM run: 200 requests, 204,800 input and 25,600 output tokens: prompt 1,024, output 128, decode ctx
  1,024 + 64 = 1,088 = 68 blocks of 16 exactly. 16 requests at once:
  ITL >= (16,060,522,496 + 16 x 1,088 x 131,072) / 3.35e12 = 18,342,223,872 / 3.35e12 = 5.475291 ms;
  TTFT >= 2 x 8,030,261,248 x 1,024 / 989e12 = 16.628893 ms (more than the weights' read, 4.79 ms);
  throughput <= 16 / 5.475291 ms = 2,922.22 tok/s.
- SGLang run: 500 requests, 512,000 / 128,000 tokens: prompt 1,024, output 256, decode ctx 1,152; mean
  concurrency 48.71 -> 48 (rounded down: a bound for fewer requests is lower, so it stays a bound). SGLang pages
  one token: ITL >= (16,060,522,496 + 48 x 1,152 x 131,072) / 3.35e12 = 23,308,279,808 / 3.35e12 = 6.957695 ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvsize
from kvsize.bench_result import read_bench_results
from kvsize.errors import ConfigError, UsageError

MODEL = "meta-llama/Llama-3.1-8B"
WEIGHTS = 16_060_522_496
PER_TOKEN = 131_072
BANDWIDTH = 3.35e12
PEAK = 989e12
PARAMS = 8_030_261_248
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "80", "NO_COLOR": "1"}


def kvsize_run(*args: str) -> subprocess.CompletedProcess[str]:
    """kvsize as a user runs it: a real process, offline, 80 columns, no colour."""
    return subprocess.run([sys.executable, "-m", "kvsize", *args], capture_output=True, text=True, env=ENV, check=False)


def vllm_result(**changes: object) -> dict[str, object]:
    result: dict[str, object] = {
        "date": "20261201-101010",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": MODEL,
        "tokenizer_id": MODEL,
        "num_prompts": 200,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 16,
        "duration": 60.1,
        "completed": 200,
        "failed": 0,
        "total_input_tokens": 204_800,
        "total_output_tokens": 25_600,
        "request_throughput": 3.33,
        "request_goodput": None,
        "output_throughput": 1700.5,
        "total_token_throughput": 5108.0,
        "max_output_tokens_per_s": 2000.0,
        "max_concurrent_requests": 16,
        "mean_ttft_ms": 180.2,
        "median_ttft_ms": 170.4,
        "std_ttft_ms": 20.0,
        "p99_ttft_ms": 300.0,
        "mean_tpot_ms": 9.1,
        "median_tpot_ms": 9.0,
        "std_tpot_ms": 1.0,
        "p99_tpot_ms": 12.0,
        "mean_itl_ms": 9.2,
        "median_itl_ms": 8.9,
        "std_itl_ms": 2.0,
        "p99_itl_ms": 20.0,
    }
    result.update(changes)
    return result


def summary(rows: list[tuple[str, object]], *, banner: bool = True) -> str:
    """A summary as both tools print it: "{:<40} {:<10}" lines under the result banner."""
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")] if banner else []
    lines += [f"{label:<40} {value:<10}" for label, value in rows]
    return "\n".join(lines) + "\n"


SGLANG_SUMMARY = summary(
    [
        ("Backend:", "sglang"),
        ("Traffic request rate:", "inf"),
        ("Max request concurrency:", "not set"),
        ("Successful requests:", 500),
        ("Benchmark duration (s):", "61.23"),
        ("Total input tokens:", 512_000),
        ("Total input text tokens:", 512_000),
        ("Total generated tokens:", 128_000),
        ("Total generated tokens (retokenized):", 127_990),
        ("Output token throughput (tok/s):", "2090.52"),
        ("Peak concurrent requests:", 64),
        ("Concurrency:", "48.71"),
        ("Mean TTFT (ms):", "410.50"),
        ("Median TTFT (ms):", "380.25"),
        ("Mean ITL (ms):", "21.30"),
        ("Median ITL (ms):", "19.87"),
    ]
)


def measured(path: Path, **options: object) -> list[kvsize.api.MeasuredAgainstBound]:
    result = kvsize.estimate(MODEL, gpu="h100", ctx="8k", bench_result=str(path), **options)  # type: ignore[arg-type]
    return list(result.measured)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_vllm_json_against_hand_worked_bounds(tmp_path: Path) -> None:
    (row,) = measured(write(tmp_path, "r.json", json.dumps(vllm_result())))
    assert (row.requests, row.prompt_tokens, row.output_tokens, row.decode_ctx) == (16, 1024, 128, 1088)
    itl = (WEIGHTS + 16 * 1088 * PER_TOKEN) / BANDWIDTH * 1000
    assert row.itl_bound_ms == pytest.approx(5.475291, rel=1e-6) == pytest.approx(itl)
    assert row.ttft_bound_ms == pytest.approx(2 * PARAMS * 1024 / PEAK * 1000) == pytest.approx(16.628893, rel=1e-6)
    assert row.output_tokens_per_s_bound == pytest.approx(16 / (itl / 1000))
    assert row.itl_share == pytest.approx(itl / 8.9)
    assert row.ttft_share == pytest.approx(16.628893 / 170.4, rel=1e-6)
    assert row.throughput_share == pytest.approx(1700.5 / 2922.22, rel=1e-5)
    assert row.faster_than_bound == ()
    assert row.tool == "vllm bench serve (json)"


def test_sglang_console_uses_mean_concurrency_rounded_down(tmp_path: Path) -> None:
    (row,) = measured(write(tmp_path, "s.txt", SGLANG_SUMMARY), engine="sglang")
    assert (row.requests, row.decode_ctx) == (48, 1152)
    assert "mean concurrency" in row.requests_source
    assert row.itl_bound_ms == pytest.approx((WEIGHTS + 48 * 1152 * PER_TOKEN) / BANDWIDTH * 1000)
    assert row.itl_bound_ms == pytest.approx(6.957695, rel=1e-6)
    assert row.itl_ms == 19.87 and row.ttft_ms == 380.25 and row.output_tokens_per_s == 2090.52
    assert row.tool == "sglang.bench_serving (console)"


def test_vllm_085_console_concurrency_printed_before_the_banner(tmp_path: Path) -> None:
    text = "Maximum request concurrency: 16\n" + summary(
        [
            ("Successful requests:", 200),
            ("Benchmark duration (s):", "60.10"),
            ("Total input tokens:", 204_800),
            ("Total generated tokens:", 25_600),
            ("Output token throughput (tok/s):", "1700.50"),
            ("Median TTFT (ms):", "170.40"),
            ("Median ITL (ms):", "8.90"),
        ]
    )
    (row,) = measured(write(tmp_path, "v.txt", text))
    assert row.requests == 16 and row.itl_bound_ms == pytest.approx(5.475291, rel=1e-6)


def test_json_lines_sweep_gives_one_row_per_run(tmp_path: Path) -> None:
    lines = [json.dumps(vllm_result(max_concurrency=c, model_id=None)) for c in (1, 4, 16)]
    rows = measured(write(tmp_path, "sweep.jsonl", "\n".join(lines) + "\n"))
    assert [r.requests for r in rows] == [1, 4, 16]
    assert [r.run.rsplit(" ", 1)[1] for r in rows] == ["#1", "#2", "#3"]
    # The ITL bound grows with the requests at once: each reads its own cache.
    assert rows[0].itl_bound_ms < rows[1].itl_bound_ms < rows[2].itl_bound_ms
    assert rows[0].itl_bound_ms == pytest.approx((WEIGHTS + 1088 * PER_TOKEN) / BANDWIDTH * 1000)


def test_concurrency_never_above_the_requests_completed(tmp_path: Path) -> None:
    (row,) = measured(write(tmp_path, "r.json", json.dumps(vllm_result(max_concurrency=512))))
    assert row.requests == 200


def test_a_run_faster_than_the_bound_is_flagged(tmp_path: Path) -> None:
    (row,) = measured(write(tmp_path, "r.json", json.dumps(vllm_result(median_itl_ms=3.0, output_throughput=5000.0))))
    assert row.faster_than_bound == ("ITL", "throughput")
    out = kvsize_run(MODEL, "--gpu", "h100", "--ctx", "8k", "--bench-result", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    assert "beyond the bound" in out.stdout and "ITL, throughput measured beyond the bound" in " ".join(
        out.stdout.split()
    )


def test_speculative_decoding_raises_the_throughput_bound(tmp_path: Path) -> None:
    (plain,) = measured(write(tmp_path, "a.json", json.dumps(vllm_result())))
    (spec,) = measured(write(tmp_path, "b.json", json.dumps(vllm_result(spec_decode_acceptance_length=2.5))))
    assert spec.output_tokens_per_s_bound == pytest.approx(2.5 * plain.output_tokens_per_s_bound)
    assert spec.itl_bound_ms == plain.itl_bound_ms  # a step (one streamed chunk) still reads the same bytes


def test_80_column_table(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", json.dumps(vllm_result()))
    for env in (ENV, {k: v for k, v in ENV.items() if k != "NO_COLOR"}):
        out = subprocess.run(
            [
                "script",
                "-qec",
                f"{sys.executable} -m kvsize {MODEL} --gpu h100 --ctx 8k --bench-result {path}",
                "/dev/null",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert out.returncode == 0, out.stdout
        import re

        plain = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout).replace("\r", "")
        assert all(len(line) <= 80 for line in plain.splitlines()), plain
        assert "measured vs bounds" in plain
        for label in ("median ITL", "median TTFT", "output tok/s"):
            (line,) = [x for x in plain.splitlines() if x.strip().startswith(label)]
            assert ">=" in line or "<=" in line
        assert "5.48 ms" in plain and "16.6 ms" in plain and "2,922" in plain


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "holds no serving benchmark result"),
        ("hello\nworld\n", "holds no serving benchmark result"),
        ('{"completed": 10}\n{bad\n', "line 2"),
        (json.dumps(vllm_result(completed=0)), "has no completed"),
        (json.dumps(vllm_result(max_concurrency=None)), "without --max-concurrency"),
        (json.dumps(vllm_result(median_itl_ms="fast")), "median_itl_ms"),
        (json.dumps(vllm_result(median_itl_ms=-1)), "not a measured figure"),
        (json.dumps(vllm_result(median_itl_ms=True)), "not a number"),
        (json.dumps(vllm_result(total_input_tokens=float("nan"))), "not a measured figure"),
        (json.dumps(vllm_result(model_id="Qwen/Qwen3-8B")), "measured Qwen/Qwen3-8B, not meta-llama/Llama-3.1-8B"),
        ("[1, 2]", "holds no serving benchmark result"),
    ],
)
def test_bad_results_are_one_line_exit_2(tmp_path: Path, text: str, says: str) -> None:
    path = write(tmp_path, "bad.json", text)
    out = kvsize_run(MODEL, "--gpu", "h100", "--ctx", "8k", "--bench-result", str(path))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert says in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2  # the error and its hint


def test_needs_a_card(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", json.dumps(vllm_result()))
    with pytest.raises(UsageError, match="needs the card's memory bandwidth"):
        kvsize.estimate(MODEL, ctx="8k", bench_result=str(path))


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the --bench-result file is a folder"):
        read_bench_results(str(tmp_path))


def test_local_folder_matches_the_hub_id_it_ends_with(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", json.dumps(vllm_result(model_id="/models/meta-llama/Llama-3.1-8B")))
    (row,) = measured(path)
    assert row.requests == 16


def test_plot_speed_curve_is_one_over_the_itl_bound() -> None:
    from kvsize.config import parse_config
    from kvsize.plot import decode_speed_curves
    from kvsize.resolve import load_model_config

    loaded = load_model_config(MODEL)
    result = kvsize.api.estimate_loaded(loaded, gpu="h100", ctx="32k", batch=[1, 16], itl_ms=50)
    curves = decode_speed_curves(result, parse_config(loaded.raw), [1024, 32768])
    # batch 1 at 1,024 tokens: 3.35e12 / (16,060,522,496 + 1,024 x 131,072) = 206.85 tok/s
    assert curves[1][0] == pytest.approx(BANDWIDTH / (WEIGHTS + 1024 * PER_TOKEN))
    assert curves[1][0] == pytest.approx(206.85, abs=0.01)
    # batch 16 at 32,768: 3.35e12 / (16,060,522,496 + 16 x 32,768 x 131,072) = 39.65 tok/s; it falls with ctx
    assert curves[16][1] == pytest.approx(BANDWIDTH / (WEIGHTS + 16 * 32768 * PER_TOKEN))
    assert curves[16][1] < curves[16][0] and curves[1][1] < curves[1][0]


def test_plot_with_itl_draws_the_speed_panel(tmp_path: Path) -> None:
    target = tmp_path / "chart.svg"
    out = kvsize_run(MODEL, "--gpu", "h100", "--ctx", "32k", "--batch", "1,8", "--itl", "50", "--plot", str(target))
    assert out.returncode == 0, out.stderr
    svg = target.read_text()
    assert "decode tok/s per request (bound)" in svg and "batch 8" in svg and "ITL 50 ms" in svg
