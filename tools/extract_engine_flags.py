"""Extract the CLI flags each engine release accepts from its source, statically (AST / regex), into
kvsize/data/engine_flags/<engine>.json. Run: python3 extract_engine_flags.py vllm|sglang|llamacpp OUT.json

vLLM: vllm/engine/arg_utils.py EngineArgs.add_cli_args (+ AsyncEngineArgs.add_cli_args); `**x_kwargs["field"]`
is expanded as get_kwargs expands the config dataclass's field (bool -> --name and --no-name, Literal ->
choices). SGLang: python/sglang/srt/server_args.py ServerArgs.add_cli_args. llama.cpp:
vendor/llama.cpp/common/arg.cpp common_arg({...}) option lists (llama-cpp-python sdists).
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path

# Where tools/get_sdist.py extracted the sources (KVSIZE_SDIST_DIR, default ./sdist).
SDIST = Path(os.environ.get("KVSIZE_SDIST_DIR", "sdist"))


def _version_key(name: str) -> tuple:
    from packaging.version import Version

    return (Version(name),)


# ---------------------------------------------------------------- vLLM
def _str_list(node: ast.AST, aliases: dict[str, list[str]]) -> list[str] | None:
    """Strings of a Literal[...] / list / tuple / alias node."""
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Literal":
        node = node.slice
    if isinstance(node, ast.Name) and node.id in aliases:
        return aliases[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        out: list[str] = []
        for e in node.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                out.append(e.value)
            elif isinstance(e, ast.Starred) and isinstance(e.value, ast.Name) and e.value.id in aliases:
                out.extend(aliases[e.value.id])
            elif isinstance(e, ast.Constant) and e.value is None:
                continue
            else:
                return None
        return out
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return None


def _aliases(files: list[Path]) -> dict[str, list[str]]:
    """Module-level `X = Literal[...]` / `X: list[str] = [...]` string lists, by name."""
    out: dict[str, list[str]] = {}
    for f in files:
        try:
            tree = ast.parse(f.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        for _ in range(2):  # aliases of aliases
            for node in tree.body:
                target, value = None, None
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    target, value = node.targets[0].id, node.value
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                    target, value = node.target.id, node.value
                if target is None:
                    continue
                # list(get_args(QuantizationMethods))
                if isinstance(value, ast.Call) and ast.unparse(value).startswith("list(get_args("):
                    inner = value.args[0].args[0]  # type: ignore[attr-defined]
                    if isinstance(inner, ast.Name) and inner.id in out:
                        out[target] = out[inner.id]
                    continue
                strings = _str_list(value, out)
                if strings:
                    out.setdefault(target, strings)
    return out


def _classes(files: list[Path]) -> dict[str, dict[str, ast.expr]]:
    """Dataclass fields (name -> annotation) of every class in the config modules."""
    out: dict[str, dict[str, ast.expr]] = {}
    for f in files:
        try:
            tree = ast.parse(f.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = {
                    s.target.id: s.annotation
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                out.setdefault(node.name, fields)
    return out


def _annotation_kind(ann: ast.expr, aliases: dict[str, list[str]]) -> tuple[bool, list[str] | None]:
    """(is a BooleanOptionalAction flag, Literal choices) of a dataclass field's annotation, as get_kwargs reads
    it. `bool | str | None` (0.2x optional-valued flags) is not a boolean action."""
    text = ast.unparse(ann).replace("'", "").replace('"', "")
    tokens = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text))
    if "bool" in tokens:
        if "str" in tokens and "bool" in tokens and not (tokens - {"bool", "str", "None", "Optional", "Union"}):
            return False, None
        return True, None
    for node in ast.walk(ann):
        strings = _str_list(node, aliases) if isinstance(node, (ast.Subscript, ast.Name)) else None
        if strings:
            return False, strings
    return False, None


def _add_cli_args(tree: ast.Module, cls: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "add_cli_args":
                    return item
    return None


def vllm_release(root: Path) -> dict:
    arg_utils = root / "vllm/engine/arg_utils.py"
    tree = ast.parse(arg_utils.read_text())
    config_files = [root / "vllm/config.py"] if (root / "vllm/config.py").exists() else []
    config_files += sorted((root / "vllm/config").rglob("*.py")) if (root / "vllm/config").is_dir() else []
    quant = root / "vllm/model_executor/layers/quantization/__init__.py"
    aliases = _aliases([*config_files, quant, arg_utils])
    classes = _classes(config_files)
    flags: set[str] = set()
    choices: dict[str, list[str]] = {}
    for cls in ("EngineArgs", "AsyncEngineArgs"):
        fn = _add_cli_args(tree, cls)
        if fn is None:
            continue
        kw_class: dict[str, str] = {}
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "get_kwargs"
                and isinstance(node.value.args[0], ast.Name)
            ):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        kw_class[t.id] = node.value.args[0].id
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "add_argument":
                continue
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            names = [n for n in names if n.startswith("-")]
            if not names:
                continue
            boolean, found = False, None
            for k in node.keywords:
                if k.arg == "action" and "BooleanOptionalAction" in ast.unparse(k.value):
                    boolean = True
                if k.arg == "choices":
                    found = _str_list(k.value, aliases)
                spread = k.value
                if k.arg is None and isinstance(spread, ast.Dict):  # **{**cache_kwargs["x"], "default": None}
                    spread = next((v for key, v in zip(spread.keys, spread.values) if key is None), spread)
                if k.arg is None and isinstance(spread, ast.Subscript):  # **model_kwargs["dtype"]
                    var = getattr(spread.value, "id", None)
                    field = spread.slice.value if isinstance(spread.slice, ast.Constant) else None
                    ann = classes.get(kw_class.get(var or "", ""), {}).get(field or "")
                    if ann is not None:
                        b, c = _annotation_kind(ann, aliases)
                        boolean = boolean or b
                        found = found or c
            for n in names:
                flags.add(n)
                if boolean and n.startswith("--"):
                    flags.add("--no-" + n[2:])
                if found:
                    choices[n] = sorted(set(found))
    keep = ("--kv-cache-dtype", "--dtype", "--quantization")
    return {
        "source": f"vllm/engine/arg_utils.py:EngineArgs.add_cli_args@{root.name.split('-', 1)[1]}",
        "flags": sorted(flags),
        "choices": {k: choices[k] for k in keep if k in choices},
    }


# ---------------------------------------------------------------- SGLang
def _sglang_fields(files: list[Path], aliases: dict[str, list[str]]) -> tuple[set[str], dict[str, list[str]]]:
    """Flags of `A[T, Arg(...)]` / `A[T, "help"]` fields (arg_groups/arg_utils.py add_cli_args_from_dataclass,
    0.5.13+): `Arg.cli_name` or --field-name, plus `Arg.aliases`; `no_cli=True` and `_private` fields skipped;
    bool fields are store_true (no --no- form); Literal types or `choices=` give the choices."""
    flags: set[str] = set()
    choices: dict[str, list[str]] = {}
    for f in files:
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ann = node.annotation
            if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "A"):
                continue
            if not isinstance(ann.slice, ast.Tuple) or len(ann.slice.elts) < 2:
                continue
            type_node, meta = ann.slice.elts[0], ann.slice.elts[1]
            name = node.target.id
            if name.startswith("_"):
                continue
            names = ["--" + name.replace("_", "-")]
            found = None
            if isinstance(meta, ast.Call) and getattr(meta.func, "id", "") == "Arg":
                kw = {k.arg: k.value for k in meta.keywords}
                if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
                    continue
                if isinstance(kw.get("cli_name"), ast.Constant):
                    names = [kw["cli_name"].value]
                if "aliases" in kw:
                    names += _str_list(kw["aliases"], aliases) or []
                if "choices" in kw:
                    found = _str_list(kw["choices"], aliases)
            elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)) and not isinstance(
                meta, ast.JoinedStr
            ):
                continue
            if found is None:
                for sub in ast.walk(type_node):
                    if isinstance(sub, ast.Subscript) and getattr(sub.value, "id", "") == "Literal":
                        found = _str_list(sub, aliases)
            for n in names:
                flags.add(n)
                if found:
                    choices[n] = sorted(set(found))
    return flags, choices


def sglang_release(root: Path) -> dict:
    path = root / "python/sglang/srt/server_args.py"
    if not path.exists():
        path = root / "sglang/srt/server_args.py"
    groups = path.parent / "arg_groups"
    group_files = sorted(groups.rglob("*.py")) if groups.is_dir() else []
    tree = ast.parse(path.read_text())
    aliases = _aliases([path, *group_files])
    fn = _add_cli_args(tree, "ServerArgs")
    assert fn is not None, root
    flags: set[str] = set()
    choices: dict[str, list[str]] = {}
    if "add_cli_args_from_dataclass" in ast.unparse(fn):
        flags, choices = _sglang_fields([path, *group_files], aliases)
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            names = [n for n in names if n.startswith("-")]
            found = None
            boolean = False
            for k in node.keywords:
                if k.arg == "choices":
                    found = _str_list(k.value, aliases)
                if k.arg == "action" and "BooleanOptionalAction" in ast.unparse(k.value):
                    boolean = True
            for n in names:
                flags.add(n)
                if boolean:
                    flags.add("--no-" + n[2:])
                if found:
                    choices[n] = sorted(set(found))
    keep = ("--kv-cache-dtype", "--dtype", "--quantization")
    version = root.name.split("-", 1)[1] if root.name.startswith("sglang-") else root.name
    where = "python/sglang/srt/server_args.py" if "python" in path.parts else "sglang/srt/server_args.py"
    return {
        "source": f"{where}:ServerArgs.add_cli_args@{version}"
        + (
            " (+ arg_groups/fields via add_cli_args_from_dataclass)"
            if group_files and "add_cli_args_from_dataclass" in ast.unparse(fn)
            else ""
        ),
        "flags": sorted(flags),
        "choices": {k: choices[k] for k in keep if k in choices},
    }


# ---------------------------------------------------------------- llama.cpp
def _calls(text: str, name: str) -> list[str]:
    """The argument text of every `name(...)` call in C++ `text` (parentheses matched, literals skipped)."""
    out = []
    for m in re.finditer(re.escape(name) + r"\s*\(", text):
        i, depth = m.end(), 1
        while i < len(text) and depth:
            ch = text[i]
            if ch in "\"'":
                j = i + 1
                while j < len(text) and text[j] != ch:
                    j += 2 if text[j] == "\\" else 1
                i = j + 1
                continue
            if text.startswith("//", i):
                i = text.find("\n", i)
                continue
            depth += {"(": 1, ")": -1}.get(ch, 0)
            i += 1
        out.append(text[m.end() : i - 1])
    return out


def llamacpp_release(root: Path) -> dict:
    """llama-server's options: common_arg entries whose examples hold LLAMA_EXAMPLE_SERVER or COMMON (the
    default) and whose excludes do not hold SERVER (common/arg.cpp add_opt)."""
    path = root / "vendor/llama.cpp/common/arg.cpp"
    text = path.read_text()
    flags: set[str] = set()
    bare: set[str] = set()
    for call in _calls(text, "add_opt"):
        if not call.lstrip().startswith("common_arg"):
            continue
        examples = re.findall(r"\.set_examples\(\{([^}]*)\}\)", call)
        excludes = re.findall(r"\.set_excludes\(\{([^}]*)\}\)", call)
        ex = examples[-1] if examples else "LLAMA_EXAMPLE_COMMON"
        if not re.search(r"LLAMA_EXAMPLE_(SERVER|COMMON)\b", ex):
            continue
        if excludes and re.search(r"LLAMA_EXAMPLE_SERVER\b", excludes[-1]):
            continue
        head = call[call.index("(") + 1 :]
        names: list[str] = []
        while (lst := re.match(r"\s*\{([^{}]*)\}\s*,", head)) is not None:  # names, then negated names
            found = re.findall(r'"(-[^"]*)"', lst.group(1))
            if not found:
                break
            names += found
            head = head[lst.end() :]
        # a handler of (params) or (params, bool value) is a switch; (params, int / string value) takes a value
        takes_value = re.search(r"\[\]\s*\(\s*common_params\s*&\s*\w*\s*,\s*(?!\s|bool\b)", call) is not None
        flags.update(names)
        if not takes_value:
            bare.update(names)
    m = re.search(r"kv_cache_types\s*=\s*\{([^}]*)\}", text)
    cache_types = re.findall(r"GGML_TYPE_([A-Z0-9_]+)", m.group(1)) if m else []
    version = root.name.split("-")[-1]
    return {
        "source": f"vendor/llama.cpp/common/arg.cpp:common_params_parser_init@llama-cpp-python {version}",
        "flags": sorted(flags),
        "bare": sorted(bare),
        "choices": {"-ctk": sorted(t.lower() for t in cache_types)} if cache_types else {},
    }


def main() -> None:
    engine, out = sys.argv[1], Path(sys.argv[2])
    pkg = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama-cpp-python"}[engine]
    fn = {"vllm": vllm_release, "sglang": sglang_release, "llamacpp": llamacpp_release}[engine]
    roots = {r.name[len(pkg) + 1 :]: r for r in (SDIST / pkg).glob(f"{pkg}-*")}
    if engine == "sglang":  # 0.5.11+ publish no sdist: their wheels, unpacked
        roots.update({r.name: r for r in (SDIST.parent / "wheels" / "sglang").glob("0.*") if (r / "sglang").is_dir()})
    releases = {v: fn(roots[v]) for v in sorted(roots, key=_version_key)}
    data = json.loads(out.read_text()) if out.exists() else {}
    data["releases"] = releases
    out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    print(engine, len(releases), "releases")


if __name__ == "__main__":
    main()
