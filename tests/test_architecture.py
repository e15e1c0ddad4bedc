"""The package layout holds: dependencies point one way, no import cycles, small modules.

Every ``import`` in llmsim/ is read from the source (function-level and TYPE_CHECKING imports included:
a lazy import is still a dependency), so these fail as soon as a change adds a forbidden edge.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "llmsim"

# package -> packages it may import (besides itself and ``llmsim`` with its version); a top-level module
# (``llmsim.atomic``) counts as a package of its own, ``llmsim.__main__`` may import anything
ALLOWED = {
    "engine": set(),
    "spec": {"engine"},
    "study": {"engine", "spec", "schema"},
    "validation": {"engine", "spec", "study", "atomic", "schema"},
    "output": {"engine", "spec", "study", "atomic", "schema"},
    "cli": {"engine", "spec", "study", "validation", "output", "atomic", "schema"},
    "atomic": set(),
    "schema": set(),  # the output contract: data only
}
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """The llmsim modules ``path`` imports (a name imported from a package is its submodule if one exists)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "llmsim"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "llmsim":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in MODULES else node.module)
    return out


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _package(module: str) -> str:
    """engine, spec, ..., atomic; "llmsim" for the package itself (its version)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "llmsim"


def test_the_walk_sees_the_packages_and_their_imports():
    # guards the test itself: a walker that found nothing would pass everything below
    assert set(ALLOWED) <= {_package(m) for m in MODULES}
    assert "llmsim.engine.network.collectives" in GRAPH["llmsim.engine.network.groups"]
    assert "llmsim.engine.training" in GRAPH["llmsim.validation.runs"]  # a function-level import


def test_dependencies_point_one_way():
    bad = []
    for mod, deps in GRAPH.items():
        pkg = _package(mod)
        for dep in deps:
            target = _package(dep)
            if pkg not in ("llmsim", "__main__") and target not in {pkg, "llmsim"} | ALLOWED[pkg]:
                bad.append(f"{mod} -> {dep}")
    assert not bad, "imports against the layering (README, How the code is organised):\n" + "\n".join(sorted(bad))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_400_lines(name):
    assert len(MODULES[name].read_text(encoding="utf-8").splitlines()) <= MAX_LINES


# classes that hold a field named like a declared setting without declaring it again: the split resolved
# per row (dp derived, auto picked) and a disaggregated pool's own tp and pp
RESOLVED = {("llmsim/engine/split.py", "Split"), ("llmsim/spec/scenario.py", "PoolSpec")}


def test_each_setting_is_declared_once():
    """No class outside engine/settings.py declares a field named like a declared setting: the schema,
    the engine's inputs and the flags are derived from the one declaration."""
    import dataclasses

    from llmsim.spec.declared import declared_sections

    names = {f.name for _, section in declared_sections() for f in dataclasses.fields(section)}
    assert {"pipeline_embedding_stage", "kv_precision", "max_batch_tokens", "pue"} <= names
    again = []
    for name, path in MODULES.items():
        rel = path.relative_to(ROOT.parent).as_posix()
        if name == "llmsim.engine.settings":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and (rel, node.name) not in RESOLVED:
                again += [f"{rel} {node.name}.{s.target.id}" for s in node.body if isinstance(s, ast.AnnAssign)
                          and isinstance(s.target, ast.Name) and s.target.id in names]
    assert again == []

