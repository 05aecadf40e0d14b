"""The package's shape, checked from its source: no import cycle, imports at module top, modules
and functions of a readable size, and stages that import only the stages below them.

These read the source with :mod:`ast` (nothing is imported), so a cycle hidden behind an import
inside a function is found as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shared_run import once

PKG = Path(__file__).resolve().parents[1] / "src" / "letterchunk"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
# a function longer than MAX_FUNCTION_LINES carries this comment (with the reason) on the line
# directly above its ``def`` (or above its first decorator)
LONG_MARK = "# long function:"
# an import inside a function is allowed only for an optional or heavy dependency (a platform
# module, an optional extra, or in the CLI a stage whose import would slow every command's start),
# with this comment on the import line or the line above it saying why
LAZY_MARK = "# deferred:"

# the ground floor: root modules every stage may import; they import only each other
ROOT_MODULES = {
    "errors",
    "install",
    "io",
    "layout",
    "redact",
    "resources",
    "settings",
    "tokens",
    "version",
}
# each stage package may import only the packages listed for it (and the ground floor)
ALLOWED = {
    "retrieval": {"retrieval", "contract", "text"},
    "text": {"text", "contract"},
    "contract": {"contract", "text"},
    "llm": {"llm", "text", "contract"},
    "enrich": {"enrich", "review", "llm", "text", "contract"},
    "review": {"review", "contract", "text"},
    "report": {"report", "review", "contract", "text"},
    "repair": {"repair", "review", "enrich", "llm", "report", "text", "contract"},
    "runner": {"runner", "review", "repair", "enrich", "llm", "report", "text", "contract"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path) -> list[tuple[str, ast.stmt]]:
    """(imported letterchunk module, import node) for every import in the file, those under
    ``if TYPE_CHECKING:`` included: a type-only import still ties the two modules together (a
    reader, the type checker and any later runtime use see the circle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, ast.stmt]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node, path.name == "__init__.py")
            # ``from pkg import mod`` names a module; ``from mod import name`` names the module
            names = [
                f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                for a in node.names
            ]
        else:
            continue
        found += [(n, node) for n in names if n == "letterchunk" or n.startswith("letterchunk.")]
    return found


def _graph() -> dict[str, list[str]]:
    return {
        m: sorted({t for t, _ in _imports(m, p) if t in MODULES and t != m})
        for m, p in MODULES.items()
    }


# every import, the type-only ones (``if TYPE_CHECKING:``) included; parsed once a test run
GRAPH = once("architecture-import-graph", _graph)


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert _cycles(graph) == [["a", "b", "c"]]


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _stage(m) in ALLOWED))
def test_a_stage_imports_only_the_stages_below_it(module):
    stage = _stage(module)
    wrong = [
        t
        for t in GRAPH[module]
        if t != "letterchunk"
        and t.split(".")[1] not in ROOT_MODULES
        and t.split(".")[1] not in ALLOWED[stage]
    ]
    assert wrong == [], f"{module} ({stage}/) imports {wrong}"


def test_the_ground_floor_imports_only_the_ground_floor():
    floor = {f"letterchunk.{m}" for m in ROOT_MODULES}
    assert floor <= set(MODULES), f"ROOT_MODULES names a module that is not there: {floor}"
    wrong = {m: [t for t in GRAPH[m] if t not in floor] for m in sorted(floor)}
    assert {m: t for m, t in wrong.items() if t} == {}


def test_a_type_only_import_counts(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from letterchunk.errors import ConfigError\n",
        encoding="utf-8",
    )
    assert [t for t, _ in _imports("letterchunk.mod", path)] == ["letterchunk.errors"]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _inner_imports(module: str, path: Path) -> list[str]:
    """Imports inside functions that break the rule: each needs the LAZY_MARK reason on its
    line or the line above, and only a CLI module may import the package's own modules there."""
    lines = _lines(path)
    tree = ast.parse("\n".join(lines))
    # the package's own imports, by position (_imports parses the file again, so its nodes are
    # other objects than this tree's)
    own = {(n.lineno, n.col_offset) for _, n in _imports(module, path)}
    inner = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            here = lines[node.lineno - 1] + lines[node.lineno - 2]
            local = (node.lineno, node.col_offset) in own
            if LAZY_MARK not in here or (local and not module.startswith("letterchunk.cli")):
                inner.append(f"{path.name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return inner


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_sit_at_module_top(module):
    inner = _inner_imports(module, MODULES[module])
    assert not inner, "imports inside functions without a reason:\n" + "\n".join(inner)


def test_a_deferred_import_of_the_package_counts_outside_the_cli(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(
        "def f():\n"
        "    import json  # deferred: a reason\n"
        "    from letterchunk.errors import ConfigError  # deferred: a reason\n",
        encoding="utf-8",
    )
    assert len(_inner_imports("letterchunk.retrieval.mod", path)) == 1
    assert _inner_imports("letterchunk.cli.mod", path) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_and_functions_stay_readable(module):
    path = MODULES[module]
    lines = _lines(path)
    assert len(lines) <= MAX_MODULE_LINES, f"{path}: {len(lines)} lines"
    long = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        size = (node.end_lineno or node.lineno) - node.lineno + 1
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if size > MAX_FUNCTION_LINES and LONG_MARK not in lines[first - 2]:
            long.append(f"{node.name} ({size} lines)")
    assert long == [], f"{path.name}: over {MAX_FUNCTION_LINES} lines without a reason: {long}"
