"""Imports flow one way: kernel (``omnieval.core``) ← ``schedulers``, ``cluster``, ``serving`` ← ``pool`` ← the
application (the rest of ``omnieval``). Every import statement of the shipped packages is read from source (function
bodies and ``TYPE_CHECKING`` blocks too), so a violation fails here with its file and line.

Rules:
1. A layer imports only its own package and the layers below it (``ALLOWED``); the kernel imports nothing of the
   project outside itself.
2. Another package's internals (a ``_module``) are never imported: only its public ``__init__`` API.
3. No import cycle between modules at import time (module-level imports).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("omnieval", "cluster", "serving", "pool", "schedulers")

ALLOWED: dict[str, set[str]] = {
    "kernel": set(),
    "schedulers": {"kernel"},
    "cluster": {"kernel"},
    "serving": {"kernel", "cluster"},
    "pool": {"kernel", "schedulers", "cluster", "serving"},
    "app": {"kernel", "schedulers", "cluster", "serving", "pool"},
}


def layer(module: str) -> str | None:
    """The layer a dotted module name belongs to; None outside the project."""
    top = module.split(".")[0]
    if top not in PACKAGES:
        return None
    if module == "omnieval.core" or module.startswith("omnieval.core."):
        return "kernel"
    return "app" if top == "omnieval" else top


def package_of(module: str) -> str:
    """The package whose ``__init__`` is the public face of ``module`` (the kernel is one package)."""
    return "omnieval.core" if layer(module) == "kernel" else module.split(".")[0]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, list[str], int, bool]]:
    """``(module, names, line, at import time)`` for every absolute import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, [a.name for a in node.names], node.lineno, id(node) in top_level))
        elif isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno, id(node) in top_level) for a in node.names]
    return out


def sources() -> list[Path]:
    return [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def violations() -> list[str]:
    out = []
    for path in sources():
        src = module_name(path)
        src_layer = layer(src)
        assert src_layer is not None
        for module, names, line, _ in imports(path):
            dst_layer = layer(module)
            if dst_layer is None:
                continue
            where = f"{path.relative_to(ROOT)}:{line}: {module}"
            if dst_layer != src_layer and dst_layer not in ALLOWED[src_layer]:
                out.append(f"{where}: the {src_layer} layer may not import the {dst_layer} layer")
            if package_of(module) != package_of(src):
                private = [p for p in module.split(".")[1:] if p.startswith("_")] + [n for n in names if n.startswith("_")]
                if private:
                    out.append(f"{where}: reaches into {package_of(module)}'s internals ({', '.join(private)})")
    return out


def cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    known = {module_name(p) for p in sources()}
    for path in sources():
        src = module_name(path)
        for module, names, _, top in imports(path):
            if not top:
                continue
            for dst in (module, *(f"{module}.{n}" for n in names)):
                if dst in known and dst != src:
                    graph[src].add(dst)
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                found.append(stack[stack.index(m) :] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(known):
        if n not in state:
            visit(n)
    # a package __init__ importing its own submodules is how a package is built, not a cycle between concepts
    return [c for c in found if len({package_of(m) for m in c}) > 1 or not any(m == package_of(m) for m in c)]


def test_imports_flow_one_way_through_public_apis() -> None:
    found = violations()
    assert not found, "import rule violations:\n" + "\n".join(found)


def test_no_import_cycles() -> None:
    found = cycles()
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_kernel_loads_alone() -> None:
    """Importing the kernel (what every lower package does) loads no other part of the project."""
    import subprocess
    import sys

    code = (
        "import sys, omnieval.core\n"
        "extra = sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{PACKAGES!r} and m not in ('omnieval',) and not m.startswith('omnieval.core'))\n"
        "print(extra)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_checker_catches_what_it_claims(tmp_path: Path) -> None:
    """The rules above are not vacuous: each kind of violation, written into a module, is reported."""
    assert layer("omnieval.core._config") == "kernel" and layer("omnieval._runner") == "app"
    assert layer("pool._client") == "pool" and layer("ray") is None
    bad = ROOT / "serving" / "_architecture_probe.py"
    bad.write_text("from omnieval._runner import run_suite\nfrom pool import EvalClient\nfrom omnieval.core._schema import Record\n")
    try:
        found = [v for v in violations() if "_architecture_probe" in v]
    finally:
        bad.unlink()
    assert any("serving layer may not import the app layer" in v for v in found)
    assert any("serving layer may not import the pool layer" in v for v in found)
    assert any("reaches into omnieval.core's internals (_schema)" in v for v in found)
