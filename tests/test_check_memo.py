"""kvsize check sizes each distinct deployment once (capacity_file._sized): deployments that differ only in name
or requirement share one sizing, any sizing input tells them apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsize.capacity_file import check_file

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

DEPLOYMENTS = """
deployments:
  - {name: a, model: meta-llama/Llama-3.1-8B, gpu: h100, require: {ctx: 8k, min_concurrency: 2}}
  - {name: b, model: meta-llama/Llama-3.1-8B, gpu: h100, require: {ctx: 8k, min_concurrency: 100}}
  - {name: c, model: meta-llama/Llama-3.1-8B, gpu: h100, gpu_util: 0.5, require: {ctx: 8k, min_concurrency: 2}}
  - {name: d, model: meta-llama/Llama-3.1-8B, gpu: h100, require: {ctx: 32k, min_concurrency: 2}}
  - {name: e, model: meta-llama/Llama-3.1-8B, gpu: h100, kv_dtype: fp8, require: {ctx: 8k, min_concurrency: 2}}
"""


def test_shared_sizing_keeps_each_verdict(tmp_path: Path) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text(DEPLOYMENTS)
    a, b, c, d, e = check_file(path)
    # vLLM 0.33 on an H100: a 55.06 GiB budget holds 55 requests of 8,192 x 131,072 B = 1 GiB
    # (tests/test_examples.py quickstart), 13 of 4 GiB at 32k, twice as many at fp8 (65,536 B per token).
    assert (a.max_concurrency, b.max_concurrency, d.max_concurrency, e.max_concurrency) == (55, 55, 13, 110)
    assert a.passed and not b.passed  # one sizing, two requirements
    assert c.max_concurrency is not None and c.max_concurrency < 55  # a smaller share is sized anew
    assert [r.name for r in (a, b, c, d, e)] == ["a", "b", "c", "d", "e"]
