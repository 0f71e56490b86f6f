"""The package's layers (docs/design.md §1, "Layers"), enforced on its imports.

Every `import`/`from ... import` of a vtmlir module in the package, function-local ones included, is
an edge. The test fails on
- a cycle between modules;
- an upward edge (a module importing one of a higher layer);
- an edge from one subsystem into another's internals: a subsystem uses another only through its
  package (`from ..vtc import fold_views`, the names its `__init__` exports), and the subsystems'
  own graph is acyclic; what two share otherwise moves down a layer;
- a private name (`_x`) imported from another module, or a private module imported from outside its
  package;
- a cycle among the imports that run when a module is loaded (its module-level ones), counting the
  package `__init__` each import loads on the way (`from ..passes.registry import x` runs
  `vtmlir/passes/__init__.py` first);
- a function-local import without a comment saying why it is local (a heavy or optional dependency
  deferred to first use, an upward import kept on purpose): on its line, or on a comment line right
  before the run of imports it belongs to. Any other import goes at the top of the module.
"""

from __future__ import annotations

import ast
import collections
import io
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "vtmlir"

#: (layer, module prefixes), lowest first. A module belongs to the longest matching prefix.
#: Within a layer anything may import anything (acyclically), except across the subsystems.
LAYERS = (
    ("ir", ("vtmlir.dialects", "vtmlir.errors", "vtmlir.ir_utils", "vtmlir.ir_types", "vtmlir.ir_constants",
            "vtmlir.context", "vtmlir.signature", "vtmlir.diagnostics", "vtmlir.crash_guard", "vtmlir.passes.registry", "vtmlir.passes.pipeline")),
    ("transforms", ("vtmlir.passes",)),
    ("frontend, codegen, backends", ("vtmlir.frontend", "vtmlir.codegen", "vtmlir.backend")),
    ("subsystems", ("vtmlir.vtc", "vtmlir.layouts", "vtmlir.temco", "vtmlir.lowbit", "vtmlir.dvm")),
    ("compile, CLI", ("vtmlir", "vtmlir.compiler", "vtmlir.cli", "vtmlir.demo", "vtmlir.models")),
)
SUBSYSTEM_LAYER = "subsystems"
#: Upward edges kept on purpose, each with its reason (a stale entry fails `test_known_upward_edges_exist`).
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _resolve(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, path: Path):
    """(target module, imported name or None, is function-local, line) for each vtmlir import."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        local = id(node) not in top_level
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "vtmlir":
                    yield _resolve(alias.name), None, local, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "vtmlir":
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:
                    yield f"{source}.{alias.name}", None, local, node.lineno
                else:
                    yield _resolve(source), alias.name, local, node.lineno


def _layer(module: str) -> tuple[int, str]:
    best = (-1, "", "")
    for rank, (layer, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best[2]):
                best = (rank, layer, prefix)
    return best[0], best[2]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


EDGES = collections.defaultdict(set)
SUBSYSTEM_EDGES = collections.defaultdict(set)
VIOLATIONS = collections.defaultdict(list)
LOCAL_IMPORTS = 0
for _module, _path in MODULES.items():
    for _target, _name, _local, _line in _imports(_module, _path):
        if _target == _module:
            continue
        EDGES[_module].add(_target)
        LOCAL_IMPORTS += _local
        where = f"{_path.relative_to(PACKAGE.parent)}:{_line}"
        (rank, prefix), (target_rank, target_prefix) = _layer(_module), _layer(_target)
        if target_rank > rank and (_module, _target) not in KNOWN_UPWARD:
            VIOLATIONS["upward"].append(f"{where}: {_module} ({LAYERS[rank][0]}) imports {_target} "
                                        f"({LAYERS[target_rank][0]})")
        elif target_rank == rank and LAYERS[rank][0] == SUBSYSTEM_LAYER and prefix != target_prefix:
            SUBSYSTEM_EDGES[prefix].add(target_prefix)
            if _target != target_prefix:
                VIOLATIONS["cross-subsystem"].append(f"{where}: {_module} imports {_target}, an internal "
                                                     f"module of {target_prefix}")
        if _name is not None and _private(_name):
            VIOLATIONS["private"].append(f"{where}: {_module} imports {_target}.{_name}")
        target_package, _, target_leaf = _target.rpartition(".")
        if _private(target_leaf) and not (_module + ".").startswith(target_package + "."):
            VIOLATIONS["private"].append(f"{where}: {_module} imports private module {_target}")


def _cycles(edges=EDGES, nodes=MODULES) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
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
                components.append(sorted(component))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return components


def test_every_module_has_a_layer():
    assert [m for m in MODULES if _layer(m)[0] < 0] == []


def test_known_upward_edges_exist():
    assert [edge for edge in KNOWN_UPWARD if edge[1] not in EDGES[edge[0]]] == []


def test_the_import_graph_is_acyclic():
    assert _cycles() == []


def test_the_subsystems_use_each_other_acyclically():
    assert _cycles(SUBSYSTEM_EDGES, LAYERS[3][1]) == []


@pytest.mark.parametrize("kind", ["upward", "cross-subsystem", "private"])
def test_imports_follow_the_layers(kind):
    assert VIOLATIONS[kind] == []


def _module_level_imports(tree):
    """The imports a module runs when it is loaded: top level, and in top-level `if`/`try` blocks
    (except `if TYPE_CHECKING:`)."""
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.Try) or isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            yield from (n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))


def _load_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the vtmlir modules loading it loads directly: each module-level import's target and
    the packages above the target that are not already loaded as the module's own parents."""
    def resolve(name):
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    edges = collections.defaultdict(set)
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in _module_level_imports(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    source = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                         for alias in node.names]
            for name in names:
                if name.split(".")[0] != "vtmlir":
                    continue
                parts = resolve(name).split(".")
                for i in range(1, len(parts) + 1):
                    loaded = ".".join(parts[:i])
                    if loaded in modules and not (module + ".").startswith(loaded + "."):
                        edges[module].add(loaded)
    return edges


def test_loading_a_module_runs_no_import_cycle():
    assert _cycles(_load_edges(MODULES)) == []


def _unexplained_local_imports(path: Path, name: str) -> list[str]:
    """`name:line: import` for each function-local import with no comment on its line(s), or on a
    comment line right before the run of consecutive import statements it belongs to."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    found = []

    def visit(node, in_function: bool):
        for field in ("body", "orelse", "finalbody", "handlers"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list):
                continue
            run_start = None
            for statement in statements:
                if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                    run_start = None
                    continue
                run_start = run_start or statement.lineno
                own = any(line in comments for line in range(statement.lineno, statement.end_lineno + 1))
                before = run_start - 1 in comments and lines[run_start - 2].lstrip().startswith("#")
                if in_function and not (own or before):
                    found.append(f"{name}:{statement.lineno}: {lines[statement.lineno - 1].strip()}")
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def test_function_local_imports_say_why():
    assert [where for path in sorted(MODULES.values())
            for where in _unexplained_local_imports(path, str(path.relative_to(PACKAGE.parent)))] == []


def test_the_local_import_check_sees_unexplained_imports(tmp_path):
    path = tmp_path / "fake.py"
    path.write_text(
        "import os\n\n"
        "def f():\n    import json\n    import re  # deferred: why\n\n"
        "def g():\n    # deferred: both heavy\n    import numpy\n    import torch\n\n"
        "def h():\n    x = 1  # a comment on code, not on the import\n    import sys\n"
        "    try:\n        import lzma\n    except ImportError:\n        pass\n"
    )
    assert _unexplained_local_imports(path, "fake.py") == [
        "fake.py:4: import json", "fake.py:14: import sys", "fake.py:16: import lzma"]


def test_the_load_cycle_check_counts_package_inits(tmp_path):
    """q/c.py imports p.a, whose import of q.b runs q/__init__.py, which imports q.c: a cycle that
    no edge between the two modules shows."""
    files = {"vtmlir/__init__.py": "", "vtmlir/p/__init__.py": "", "vtmlir/p/a.py": "from ..q.b import x\n",
             "vtmlir/q/__init__.py": "from .c import y\n", "vtmlir/q/b.py": "x = 1\n",
             "vtmlir/q/c.py": "def f():\n    from ..p import a  # function-local: not a load edge\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = {rel[:-3].replace("/__init__", "").replace("/", "."): tmp_path / rel for rel in files}
    assert _cycles(_load_edges(modules), modules) == []
    (tmp_path / "vtmlir/q/c.py").write_text("from ..p.a import z\n")
    assert _cycles(_load_edges(modules), modules) == [["vtmlir.p.a", "vtmlir.q", "vtmlir.q.c"]]


def test_the_checker_sees_violations(tmp_path):
    """The walk itself: relative and function-local imports resolve, private names are seen."""
    fake = tmp_path / "fake.py"
    fake.write_text("from ..passes import registry\n\ndef f():\n    from ..dialects.vt import _check_mapping\n")
    assert list(_imports("vtmlir.vtc.fake", fake)) == [
        ("vtmlir.passes.registry", None, False, 1), ("vtmlir.dialects.vt", "_check_mapping", True, 4)]
    assert _layer("vtmlir.vtc.eliminate_data_movement") == (3, "vtmlir.vtc")
    assert _layer("vtmlir.passes.registry")[0] == 0 and _layer("vtmlir.passes.unshare_fill_inits")[0] == 1
    assert _layer("vtmlir.compiler")[0] == 4 and _layer("vtmlir")[0] == 4
