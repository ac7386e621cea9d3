"""The Python API: kvsize.estimate() over a grid of contexts and KV dtypes, printed as a small table.

Run: python examples/api_example.py
"""

import kvsize

GIB = 2**30

# One call sizes every kv_dtype x ctx x batch combination (dtype outermost, then ctx, then batch).
result = kvsize.estimate(
    "meta-llama/Llama-3.1-8B",  # a built-in registry model: no network needed
    ctx=["8k", "32k", "128k"],
    kv_dtype=["bf16", "fp8"],  # fp8 means fp8_e4m3, as in vLLM
    gpu="h100",  # adds a fit check against the H100 SXM profile
)

print(f"{result.model} ({result.architecture.attention}, {result.architecture.num_layers} layers)")
print(f"{'dtype':>9} {'ctx':>7} {'B/token':>8} {'KV GiB':>7} {'max reqs':>8}")
for s in result.scenarios:
    print(f"{s.kv_dtype.value:>9} {s.ctx:>7} {s.kv_bytes_per_token:>8} {s.kv_cache_bytes / GIB:>7.2f} "
          f"{s.gpu.max_concurrency:>8}")

# The seed figure: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131072 B per token;
# at 131072 tokens that is 2^34 B = 16 GiB.
bf16_128k = next(s for s in result.scenarios if s.kv_dtype.value == "bf16" and s.ctx == 131072)
assert bf16_128k.kv_bytes_per_token == 131072
assert bf16_128k.kv_cache_bytes == 17179869184
print("seed check passed: Llama-3.1-8B bf16 at 128k = 17179869184 B")
