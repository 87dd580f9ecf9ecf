"""The import graph of src/baracuda, built with ``ast`` (module-level and function-level imports both count):
no cycles, the core imports nothing above it, the op families import no bench / testing / torch frontend, no
module is over 800 lines."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "src" / "baracuda"
PKG = "baracuda"
MAX_LINES = 800


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    """The baracuda modules an ``from X import a, b`` names: X itself, and X.a / X.b where those are modules."""
    if node.level:
        base = mod.split(".") if is_pkg else mod.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not (target == PKG or target.startswith(PKG + ".")):
        return []
    # "from X import sub" where X.sub is a module depends on X.sub (X's __init__ has begun already when a module
    # of X runs it); "from X import name" depends on X itself
    subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
    plain = len(subs) < len(node.names)
    return ([target] if plain and target in MODULES else []) + subs


def _imports(mod: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):      # every import, at module level or inside a function
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PKG or a.name.startswith(PKG + "."):
                    # "import baracuda.x.y" imports the packages on the way too
                    parts = a.name.split(".")
                    out.update(".".join(parts[:i]) for i in range(2, len(parts) + 1) if ".".join(parts[:i]) in MODULES)
        elif isinstance(node, ast.ImportFrom):
            out.update(_resolve(mod, is_pkg, node))
    out.discard(mod)
    out.discard(PKG)     # every module imports the package first; its __init__ is the loader's root
    return out


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _under(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def _cycles(nodes) -> list[list[str]]:
    """Strongly connected components of more than one module (or a self-loop), restricted to ``nodes``."""
    nodes = set(nodes)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v] & nodes:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10000))
    try:
        for v in sorted(nodes):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return out


def _edges(src_pkg: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if _under(m, src_pkg)
                  for t in ts if any(_under(t, f) for f in forbidden))


def test_graph_sees_the_package():
    assert "baracuda._core.spec" in GRAPH and "baracuda.ops.elementwise" in GRAPH
    assert "baracuda._core.spec" in GRAPH["baracuda.ops.elementwise"]


def test_no_cycles_outside_backends_triton():
    outside = [m for m in GRAPH if not _under(m, "baracuda.backends.triton")]
    assert _cycles(outside) == []


def test_no_cycles_in_backends_triton():
    assert _cycles(GRAPH) == []


def test_core_imports_nothing_above_it():
    above = ("baracuda.ops", "baracuda.backends", "baracuda.torch", "baracuda.bench", "baracuda.testing",
             "baracuda._load", "baracuda.cli", "baracuda.coverage", "baracuda.demo")
    assert _edges("baracuda._core", above) == []


def test_ops_import_no_bench_testing_or_frontend():
    assert _edges("baracuda.ops", ("baracuda.bench", "baracuda.testing", "baracuda.torch")) == []


def test_torch_frontend_imports_no_testing():
    assert _edges("baracuda.torch", ("baracuda.testing",)) == []


def test_only_the_loader_imports_every_family_and_backend():
    """baracuda/__init__ runs the loader last; the loader is the one module importing both ops and backends."""
    init = (ROOT / "__init__.py").read_text().rstrip().splitlines()
    assert init[-1].startswith("from . import _load")
    assert {"baracuda.ops", "baracuda.backends", "baracuda._core.autotune"} <= GRAPH["baracuda._load"]


def test_no_module_over_800_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


TRITON = "baracuda.backends.triton"


def _family(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[3] if mod.startswith(TRITON + ".") and len(parts) > 3 else None


def test_triton_families_share_only_lib_and_public_names():
    """A kernel family imports _lib and its own package; from another family only public names, never a private
    one (``backends/triton/<family>/`` over ``_lib/``: what two families share lives in _lib)."""
    bad = []
    for mod, path in MODULES.items():
        fam = _family(mod)
        if fam is None or fam.startswith("_"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            for target in _resolve(mod, path.name == "__init__.py", node):
                other = _family(target)
                if other is None or other == fam or other.startswith("_"):
                    continue
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private or target.rsplit(".", 1)[-1].startswith("_"):
                    bad.append(f"{mod} imports {private or target} from family {other}")
    assert bad == []
