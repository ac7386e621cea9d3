"""Write kvsize/data/head_dim_defaults.json: the `head_dim` each transformers config class sets when a config.json
leaves it out (`head_dim: int = N` in the class's dataclass fields), keyed by the class's `model_type`.

A config without head_dim is sized by transformers (and vLLM, which loads configs through it) with that default,
not hidden_size / num_attention_heads. Run against an installed transformers:

    python scripts/extract_head_dim_defaults.py
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "kvsize" / "data" / "head_dim_defaults.json"


def class_defaults(path: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.ClassDef):
            continue
        model_type, head_dim = None, None
        for item in node.body:
            names = [getattr(t, "id", None) for t in item.targets] if isinstance(item, ast.Assign) else []
            if "model_type" in names and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
                model_type = item.value.value
            if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == "head_dim":
                value = item.value
                if isinstance(value, ast.Constant) and isinstance(value.value, int) and value.value > 0:
                    head_dim = value.value
        if model_type and head_dim:
            found[model_type] = head_dim
    return found


def main() -> None:
    import transformers  # the release read; only this script needs it

    models = Path(transformers.__file__).parent / "models"
    table: dict[str, dict[str, object]] = {}
    for path in sorted(models.glob("*/configuration_*.py")):
        for model_type, head_dim in class_defaults(path).items():
            where = f"transformers {transformers.__version__} {path.relative_to(models.parent).as_posix()}"
            table.setdefault(model_type, {"head_dim": head_dim, "source": where})
    OUT.write_text(json.dumps({"transformers": transformers.__version__, "defaults": table}, indent=1) + "\n")
    print(f"{len(table)} model types -> {OUT}")


if __name__ == "__main__":
    main()
