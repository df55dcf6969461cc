"""Imports an optional package for an integration, or raises an ImportError
that names what to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, install: str, needed_by: str) -> ModuleType:
    """Returns the imported `module`.

    Raises ImportError ("<needed_by> needs <module>: pip install <install>")
    when it cannot be imported; the original error is chained as the cause.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{needed_by} needs {module}, which cannot be imported ({e}): "
                          f"pip install {install}") from e
