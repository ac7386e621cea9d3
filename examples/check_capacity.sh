#!/usr/bin/env bash
# The CI guard: check every deployment in capacity.yaml, write a JUnit report, fail when one stops fitting.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
report="$(mktemp -d)/kvsize-junit.xml"

kvsize check "$here/capacity.yaml" --junit "$report"
grep -c "<testcase" "$report" | xargs echo "junit test cases:"

# The same check as JSON, for dashboards: one object per deployment with its figures.
kvsize check "$here/capacity.yaml" --json | python3 -c 'import json, sys
for d in json.load(sys.stdin)["deployments"]:
    print(d["name"], "pass" if d["pass"] else "FAIL", d["max_concurrency"])'

# Which GPUs would serve 64 requests of 32k for the in-house model, ranked by count and price?
kvsize plan "$here/configs/acme-chat-3b" --ctx 32k --concurrency 64 --gpus h100,l4,a100-80gb,mi300x
