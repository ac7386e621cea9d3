"""Size a model kvsize has never seen: write its config.json to a folder and point kvsize at it.

Run: python examples/capacity_from_config.py
"""

import json
import tempfile
from pathlib import Path

import kvsize

# A custom grouped-query-attention model: 28 layers, 28 query heads sharing 4 KV heads of 128 dims.
CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "hidden_size": 3584,  # head_dim = 3584 / 28 = 128
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "config.json"
    path.write_text(json.dumps(CONFIG))

    # A path to config.json or to its folder both work; so does `kvsize <path>` on the command line.
    result = kvsize.estimate(str(path.parent), ctx=["8k", "32k"], batch=[1, 16], gpu_mem=24 * 2**30)

    print(f"source: {result.source}")
    for s in result.scenarios:
        fit = s.gpu
        print(f"ctx {s.ctx:>6} x {s.batch:>2}: {s.kv_cache_bytes:>12,} B KV, "
              f"{'fits' if fit.fits else 'does not fit'} on 24 GiB (max {fit.max_concurrency} requests)")
    for note in result.notes:  # e.g. that the weights' size was estimated from the config
        print(f"note: {note}")

    # 28 layers x 4 KV heads x 128 x 2 (K, V) x 2 B (bf16) = 57344 B per token.
    assert result.scenarios[0].kv_bytes_per_token == 57344
    print("per-token check passed: 57344 B")
