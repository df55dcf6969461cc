"""Reads vLLM-Omni's own source out of its PyPI wheel with `ast`, without
importing it (it needs vllm and another torch): function signatures, class
attributes' literal values and module constants, for the contract tests of
vaed_client.integrations.vllm_omni."""

from __future__ import annotations

import ast
import os
import sys
import zipfile
from pathlib import Path
from typing import Any, List, Optional, Tuple

WHEEL_NAME = "vllm_omni-0.30.0-py3-none-any.whl"
H3 = "vllm_omni/diffusion/models/minimax_h3/"

# One parameter: (name, kind, default); kind as inspect's names, default the
# literal value or "<none>" when there is none.
Param = Tuple[str, str, Any]
NO_DEFAULT = "<none>"


def find_wheel() -> Optional[Path]:
    """$VAED_VLLM_OMNI_WHEEL, else the copy scripts/integration-env.sh puts
    in <venv>/wheels; None when neither is there."""
    explicit = os.environ.get("VAED_VLLM_OMNI_WHEEL")
    candidates = [Path(explicit)] if explicit else []
    candidates.append(Path(sys.prefix) / "wheels" / WHEEL_NAME)
    return next((p for p in candidates if p.is_file()), None)


def module(wheel: Path, path: str) -> ast.Module:
    with zipfile.ZipFile(wheel) as z:
        return ast.parse(z.read(path).decode("utf-8"), filename=path)


def find_class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise KeyError(f"class {name} not in the module")


def find_function(scope: Any, name: str) -> ast.FunctionDef:
    for node in scope.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise KeyError(f"function {name} not found")


def _literal(node: Optional[ast.expr]) -> Any:
    if node is None:
        return NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def params(function: ast.FunctionDef) -> List[Param]:
    """The parameters of `function`, in order, with kinds and defaults."""
    a = function.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out: List[Param] = [(p.arg, "POSITIONAL_OR_KEYWORD", _literal(d))
                        for p, d in zip(positional, defaults)]
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", NO_DEFAULT))
    out += [(p.arg, "KEYWORD_ONLY", _literal(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", NO_DEFAULT))
    return out


def class_attribute(cls: ast.ClassDef, name: str) -> Any:
    """The literal value assigned to `name` in the class body."""
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
            return ast.literal_eval(node.value)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"{cls.name}.{name} not assigned in the class body")


def constant(tree: ast.Module, name: str) -> Any:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"constant {name} not in the module")


def attribute_calls(function: ast.FunctionDef) -> List[Tuple[str, List[str]]]:
    """(attribute name, keyword names) of every `x.attr(...)` call in it."""
    calls = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            calls.append((node.func.attr, [k.arg for k in node.keywords if k.arg]))
    return calls


def imported_names(tree: ast.Module, source_module: str) -> List[str]:
    """Names a module imports with `from <source_module> import ...`."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == source_module:
            names += [a.asname or a.name for a in node.names]
    return names
