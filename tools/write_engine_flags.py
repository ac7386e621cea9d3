"""Write kvsize/data/engine_flags/<engine>.json from extract_engine_flags.py's output: each release's flags as the
previous release's plus `added` less `removed` (the first release in full), its choices in full."""

import json
import sys
from pathlib import Path

META = {
    "vllm": (
        "vllm serve",
        "PyPI sdists vllm-X.tar.gz",
        'vllm/engine/arg_utils.py EngineArgs.add_cli_args and AsyncEngineArgs.add_cli_args; `**x_kwargs["field"]` expanded as get_kwargs expands the config dataclass field (bool: --name and --no-name, BooleanOptionalAction; Literal: choices)',
    ),
    "sglang": (
        "python -m sglang.launch_server",
        "PyPI sdists sglang-X.tar.gz (0.4.9.post2 .. 0.5.10.post1); wheels (0.5.11 .. 0.5.23, no sdist published)",
        "python/sglang/srt/server_args.py ServerArgs.add_cli_args; from 0.5.14 also the A[T, Arg(...)] fields of srt/arg_groups that add_cli_args_from_dataclass registers (Arg.cli_name or --field-name, Arg.aliases; no_cli skipped)",
    ),
    "llamacpp": (
        "llama-server",
        "PyPI sdists llama-cpp-python-X.tar.gz (vendor/llama.cpp)",
        "vendor/llama.cpp/common/arg.cpp common_params_parser_init: the common_arg names (and negated names) of options whose examples hold LLAMA_EXAMPLE_SERVER or COMMON and whose excludes do not hold SERVER; `bare`: switches that take no value",
    ),
}
engine, src, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
releases = json.loads(src.read_text())["releases"]
command, origin, how = META[engine]
rows, previous = {}, None
for version, r in releases.items():
    row = {"source": r["source"]}
    flags = set(r["flags"])
    if previous is None:
        row["flags"] = sorted(flags)
    else:
        row["added"] = sorted(flags - previous)
        row["removed"] = sorted(previous - flags)
    if "bare" in r:
        row["bare"] = r["bare"]
    row["choices"] = r["choices"]
    rows[version] = row
    previous = flags
doc = {
    "engine": engine,
    "command": command,
    "read_from": origin,
    "extracted": how,
    "extractor": "research/extract_engine_flags.py (static AST / text reading of each release's source)",
    "releases": rows,
}
text = json.dumps(doc, indent=1)
out.write_text(text + "\n")
print(out, len(text) // 1024, "KiB")
