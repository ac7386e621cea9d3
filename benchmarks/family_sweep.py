"""Every transformers model type's default config, sized by kvsize and built by transformers: is anything silent?

    .venv/bin/python benchmarks/family_sweep.py [--types llama gemma3 ...] [--jobs 2] [--timeout 180]

For each decoder model type transformers knows (AutoModelForCausalLM or AutoModelForImageTextToText), its
config class's defaults (windows and chunks shrunk to 16 so sliding layers are tested past them) go through
kvsize's parser and `--engine hf`, and transformers builds the model on the meta device and runs one forward of
40 tokens for 2 requests (tests/test_hf_oracle.py's helpers). Each type is reported as:

- exact: kvsize's hf figure equals the bytes the returned cache holds (tensors counted once each);
- refused: kvsize refused the config, with its reason (the never-silent guard, or a bad default);
- MISMATCH: kvsize sized it and the figures differ: a silent error to fix;
- transformers: transformers could not build or run it (no cache returned, meta-device limits, missing extras).

Each type runs in its own process with a timeout. A benchmark, not a gate: the default configs are not real
checkpoints (tests/test_hf_oracle.py and the family tests check real ones), and transformers' defaults are
sometimes not even valid. Takes about 30 minutes for all ~170 types on two cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Not decoder LMs kvsize sizes (encoders, encoder-decoders with their own cache, speech and vision tools).
_SKIPPED = """
bert bert-generation big_bird bigbird_pegasus biogpt blenderbot blenderbot-small blip blip-2 camembert
data2vec-text electra git gpt-sw3 kosmos-2 kosmos-2.5 marian mbart megatron-bert musicgen musicgen_melody mvp
pegasus pix2struct plbart prophetnet reformer rembert roberta roberta-prelayernorm roc_bert roformer trocr udop
vision-encoder-decoder xlm xlm-roberta xlm-roberta-xl xlnet xmod moshi pi0 florence2 pp_chart2table
pp_formulanet instructblip instructblipvideo cpmant ctrl evolla fuyu moss_transcribe_diarize idefics idefics2
idefics3
"""
SKIP = frozenset(_SKIPPED.split())

ONE = r"""
import copy, json, sys
sys.path[:0] = [{root!r}, {tests!r}]
out = {{"model_type": {model_type!r}}}
try:
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    import test_hf_oracle as oracle
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    raw = CONFIG_MAPPING[{model_type!r}]().to_dict()
    text = oracle.text_part(raw)
    for key in ("sliding_window", "attention_chunk_size"):
        if isinstance(text.get(key), int) and text[key] > oracle.WINDOW:
            text[key] = oracle.WINDOW
    try:
        spec = parse_config(copy.deepcopy(raw), source={model_type!r})
        out["kvsize"] = sum(oracle.predicted(spec, raw, KvDtype.BF16, oracle.T))
    except Exception as exc:
        out["refused"] = f"{{type(exc).__name__}}: {{str(exc)[:240]}}"
    try:
        cache = oracle.forward(oracle.build_meta_model(raw, KvDtype.BF16), oracle.T)
        seen = {{}}
        for layer in cache.layers:
            for _, t in oracle.tensors(vars(layer)):
                if t.dim():
                    seen[id(t)] = t.numel() * t.element_size()
        linear = [t for t in getattr(cache, "linear_cache", []) if isinstance(t, torch.Tensor)]
        out["transformers"] = sum(seen.values()) + sum(t.numel() * t.element_size() for t in linear)
    except Exception as exc:
        out["transformers_error"] = f"{{type(exc).__name__}}: {{str(exc)[:160]}}"
except Exception as exc:
    out["transformers_error"] = f"{{type(exc).__name__}}: {{str(exc)[:160]}}"
print("RESULT " + json.dumps(out))
"""


def decoder_types() -> list[str]:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    return sorted((set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)) - SKIP)


def run_one(model_type: str, timeout: float) -> dict[str, object]:
    code = ONE.format(root=str(ROOT), tests=str(ROOT / "tests"), model_type=model_type)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env={"HF_HUB_OFFLINE": "1"}
        )
    except subprocess.TimeoutExpired:
        return {"model_type": model_type, "transformers_error": f"timed out after {timeout:g} s"}
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"model_type": model_type, "transformers_error": (done.stderr.strip().splitlines() or ["crashed"])[-1]}
    result: dict[str, object] = json.loads(line[len("RESULT ") :])
    return result


def verdict(r: dict[str, object]) -> str:
    if "refused" in r:
        return "refused"
    if "transformers" not in r:
        return "transformers"
    return "exact" if r.get("kvsize") == r["transformers"] else "MISMATCH"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", nargs="+", help="model types (default: every decoder type transformers has)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    types = args.types or decoder_types()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda t: run_one(t, args.timeout), types))
    counts: dict[str, int] = {}
    for r in results:
        v = verdict(r)
        counts[v] = counts.get(v, 0) + 1
        detail = r.get("refused") or r.get("transformers_error") or f"{r.get('kvsize')} vs {r.get('transformers')}"
        print(f"{v:12} {r['model_type']:28} {detail if v != 'exact' else r['kvsize']}")
    print(" ".join(f"{k}: {n}" for k, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
