"""A dataclass's field names read from its module's source, without importing it.

Why: a replica checks the user's engine arguments against the installed engine's own dataclass (vLLM's
``AsyncEngineArgs``, SGLang's ``ServerArgs``) before it starts the server, so a typo fails with the allowed names.
Importing that module pulls in the whole engine (torch, transformers, the engine's config tree): 6.6 s alone and
more on a loaded node, on the critical path before the server even starts, and the server then imports it all again.
Parsing the one file takes ~30 ms. A layout this parser does not recognise returns None and the caller imports.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

_NOT_FIELDS = ("ClassVar", "InitVar", "KW_ONLY")


def dataclass_fields(package: str, relpath: str, cls: str) -> set[str] | None:
    """Fields of dataclass ``cls`` in ``<package>/<relpath>``, its bases defined in that file included; None when the
    package, the file or the class is not there."""
    spec = importlib.util.find_spec(package)  # a top-level name: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    src = Path(next(iter(spec.submodule_search_locations))) / relpath
    try:
        tree = ast.parse(src.read_text())
    except (OSError, SyntaxError):
        return None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if cls not in classes:
        return None
    fields: set[str] = set()
    todo, seen = [cls], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in classes:
            continue
        seen.add(name)
        node = classes[name]
        for b in node.body:
            if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                if not any(k in ast.unparse(b.annotation) for k in _NOT_FIELDS):
                    fields.add(b.target.id)
        todo += [ast.unparse(base) for base in node.bases]
    return fields or None
