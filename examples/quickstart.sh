#!/usr/bin/env bash
# kvsize quickstart: a short shell session. Run it with `bash -euo pipefail examples/quickstart.sh`.
# Every model used here ships in kvsize's built-in registry, so this works offline.
set -euo pipefail

# 1. The KV cache of Llama-3.1-8B at a 128k context (bf16, taken from the config's dtype).
#    32 layers x 8 KV heads x 128 head_dim x 2 (K and V) x 2 B = 131,072 B per token -> 16 GiB at 128k.
kvsize meta-llama/Llama-3.1-8B --ctx 128k

# 2. Does it fit on one H100? A grid of contexts and batch sizes, with the memory split drawn as bars.
#    8 requests of 128k (128 GiB of KV) do not: kvsize says what would make them fit, and exits 1.
kvsize meta-llama/Llama-3.1-8B --ctx 8k,32k,128k --batch 1,8 --gpu h100 || echo "exit code $?: a scenario does not fit"

# 3. The same question for a card kvsize has no profile for: give its memory.
kvsize Qwen/Qwen3-8B --ctx 32k --batch 4 --kv-dtype bf16,fp8 --gpu-mem 24GiB || echo "exit code $?: a scenario does not fit"

# 4. Scripts read --json: pull one field out with python3.
kvsize meta-llama/Llama-3.1-8B --ctx 8k --gpu h100 --json \
  | python3 -c 'import json, sys; s = json.load(sys.stdin)["scenarios"][0]
print("requests of 8k tokens that fit on an H100:", s["gpu"]["max_concurrency"])'

# 5. What --gpu accepts (read through --json rather than `| head`, which would break pipefail).
kvsize gpus --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["gpus"]), "GPU profiles")'
