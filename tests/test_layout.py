"""The package's architecture, enforced: stage packages import only downwards, no cycles, no private names.

The layers, bottom to top (docs/architecture.md draws them):

0. base modules: ``schema``, ``_io``, ``_options``, ``_sqlite``, ``redact``, ``text``, ``vectors``
1. ``dataset``, ``llm``
2. ``embeddings``
3. ``scoring``
4. ``generation``, ``baselines``
5. ``analysis``, ``related``
6. ``pipeline``
7. ``cli``

A module may import its own package and any package of a lower layer; two packages of one layer never import
each other. The import graph of pv4kit's modules (function-local imports included) has no cycle. No module
imports a ``_private`` name defined in another package, and none imports from the front door ``pv4kit``
(except ``__version__``). Read from the source with :mod:`ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "pv4kit"

LAYERS: dict[str, int] = {
    "schema": 0,
    "_io": 0,
    "_options": 0,
    "_sqlite": 0,
    "redact": 0,
    "text": 0,
    "vectors": 0,
    "dataset": 1,
    "llm": 1,
    "embeddings": 2,
    "scoring": 3,
    "generation": 4,
    "baselines": 4,
    "analysis": 5,
    "related": 5,
    "pipeline": 6,
    "cli": 7,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _unit(module: str) -> str | None:
    """The layer unit of a module: its stage package, or the base module itself (None: the front door)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _resolve(target: str, modules: dict[str, Path]) -> str:
    """The pv4kit module an import names (``pv4kit.x.y.name`` -> ``pv4kit.x.y`` when ``name`` is not one)."""
    while target not in modules and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def _imports(path: Path, modules: dict[str, Path]) -> list[tuple[int, str, str | None]]:
    """``(line, module, imported name or None)`` for every import of a pv4kit module in ``path``."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "pv4kit"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "pv4kit":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((node.lineno, sub if sub in modules else base, alias.name))
    return [(line, _resolve(t, modules), name) for line, t, name in out]


def _edges() -> list[tuple[str, int, str, str | None]]:
    modules = _modules()
    return [
        (src, line, dst, name)
        for src, path in modules.items()
        for line, dst, name in _imports(path, modules)
        if dst != src
    ]


def test_every_package_and_base_module_has_a_layer():
    units = {_unit(m) for m in _modules()} - {None, "__main__"}
    assert units <= set(LAYERS), f"modules without a layer here: {sorted(units - set(LAYERS))}"


def test_packages_import_only_downwards():
    bad = []
    for src, line, dst, _ in _edges():
        a, b = _unit(src), _unit(dst)
        if a in (None, "__main__") or b is None or a == b:
            continue
        if LAYERS[b] >= LAYERS[a]:
            bad.append(f"{src}:{line} imports {dst} ({a} is layer {LAYERS[a]}, {b} is layer {LAYERS[b]})")
    assert not bad, "imports that run sideways or upwards:\n" + "\n".join(bad)


def test_no_module_imports_the_front_door():
    bad = [
        f"{src}:{line} imports {name!r} from pv4kit"
        for src, line, dst, name in _edges()
        if dst == "pv4kit" and _unit(src) not in (None, "__main__") and name != "__version__"
    ]
    assert not bad, "\n".join(bad)


def test_no_private_names_across_packages():
    bad = [
        f"{src}:{line} imports {name} from {dst}"
        for src, line, dst, name in _edges()
        if name and name.startswith("_") and name != "__version__" and _unit(src) != _unit(dst)
    ]
    assert not bad, "private names used across packages:\n" + "\n".join(bad)


def test_the_import_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for src, _, dst, _ in _edges():
        if _unit(src) not in (None, "__main__") and _unit(dst) is not None:
            graph.setdefault(src, set()).add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, "modules importing each other in a loop: " + "; ".join(" <-> ".join(c) for c in cycles)
