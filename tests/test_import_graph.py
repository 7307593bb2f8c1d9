"""The import graph of nac_engine and nac_studio has no cycle, and no two packages import each other.

Every import counts, including those inside functions (a lazy import is still a dependency: it only
moves the cost), except those under ``if TYPE_CHECKING:``. A "package" is ``nac_engine.format``,
``nac_studio.views``, ...; a top-level module (``nac_engine.cli``) is its own."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("nac_engine", "nac_studio")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = f
    return mods


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (the nearest existing module of a dotted name)."""
    mods = _modules()

    def owner(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [owner(a.name) for a in node.names]
            else:
                base = package[:len(package) - node.level + 1] if node.level else []
                where = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{where}.{a.name}" if f"{where}.{a.name}" in mods else owner(where)
                           for a in node.names]
            graph[mod].update(t for t in targets if t and t != mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _package(mod: str) -> str:
    return ".".join(mod.split(".")[:2])


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_no_two_packages_import_each_other():
    edges: dict[tuple[str, str], list[str]] = {}
    for a, targets in import_graph().items():
        for b in targets:
            if _package(a) != _package(b):
                edges.setdefault((_package(a), _package(b)), []).append(f"{a} -> {b}")
    both = {tuple(sorted(k)): edges[k] + edges[(k[1], k[0])] for k in edges if (k[1], k[0]) in edges}
    assert both == {}


def test_the_checker_sees_lazy_imports_and_ignores_type_checking():
    # the two rules the tests above rest on, on a graph made here
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
                     "def f():\n    import b\n")
    names = [n.names[0].name for n in _imports(tree)]
    assert "b" in names and "a" not in names
    assert cycles({"x": {"y"}, "y": {"x"}, "z": {"x"}}) == [["x", "y"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def _engine_private_names() -> set[str]:
    """Every private attribute the engine's classes have: assigned as ``self._name``, declared as
    a (dataclass) field ``_name: T``, or a ``__slots__`` entry. The attributes views must not read."""
    names = set()
    for f in (ROOT / "nac_engine").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
                    elif isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                              for t in item.targets):
                        names.update(e.value for e in ast.walk(item.value)
                                     if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_view_reads_an_engine_private():
    """Views and widgets read the engine through its public API (``nac.buffer``, not ``nac._buf``;
    ``span.has_children``, not ``span._builder``), and import no private name of it."""
    private = _engine_private_names()
    found = []
    for folder in ("views", "widgets"):
        for f in (ROOT / "nac_studio" / folder).rglob("*.py"):
            tree = ast.parse(f.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in private \
                        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.append(f"{f.name}:{node.lineno} .{node.attr}")
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nac_engine"):
                    found += [f"{f.name}:{node.lineno} import {a.name}" for a in node.names
                              if a.name.startswith("_")]
    assert found == []
