"""Exit 1 answers what the user asked (issue 20): without --ctx the contexts are kvsize's grid (4k to the
model's maximum), so `kvsize MODEL --gpu CARD` is "does it fit at all", no only when no context fits; with
--ctx every context given must fit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("args", "code"),
    [
        # Llama-3.1-8B bf16 on a 24 GB RTX 4090: 4k and 32k fit, 128k does not (16 GiB of KV beside 15 GiB of
        # weights): the grid's answer is yes.
        (["meta-llama/Llama-3.1-8B", "--gpu", "rtx-4090"], 0),
        (["meta-llama/Llama-3.1-8B", "--gpu", "rtx-4090", "--ctx", "4k"], 0),
        (["meta-llama/Llama-3.1-8B", "--gpu", "rtx-4090", "--ctx", "4k,128k"], 1),
        # 70B bf16 (about 131 GiB of weights) on 24 GB: no context fits.
        (["meta-llama/Llama-3.1-70B-Instruct", "--gpu", "rtx-4090"], 1),
    ],
)
def test_exit_follows_the_question(args: list[str], code: int) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == code, done.stdout[-600:] + done.stderr
