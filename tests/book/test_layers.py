"""gpukit's layers hold: each module imports only the layers below its own (CONTRIBUTING.md, "Where things live");
and the book's three products import downwards: gpukit (what a learner's kernel imports) nothing of the others,
booktools (the book's machinery: GPU runs, the bench) gpukit, and the site build (``_ext/``) and ``scripts/`` both
of those; none of them imports the tests.

The layers, lowest first: ``base`` (imports nothing of gpukit), ``core``, ``measuring``, ``topics``, ``exercises``,
``commands``; ``gpukit/__init__.py`` and ``__main__.py`` sit above them all. Read from the source (no import runs),
every module's gpukit imports, at the top or inside a function, must:

- go down or stay in its layer, never up (``core`` importing ``measuring``), nor through the package's front
  (``from gpukit import check`` inside a layer);
- not go across topics: a topic is one lesson's helpers, and what two topics share belongs in a lower layer;
- form no cycle between modules;
- take no private name (``_x``) from another module, by import or as an attribute of an imported module;
- sit at the top of the file, or, inside a function, carry a comment on its line or the line above saying why
  (a lazy import that keeps a module light, or one that would otherwise be circular): a file's header then
  shows what it depends on.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.booktoc import ROOT

LAYERS = ("base", "core", "measuring", "topics", "exercises", "commands")
FRONT = {"gpukit", "gpukit.__main__"}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. gpukit.core.timing
    target: str  # the imported module, e.g. gpukit.core.arrays
    names: tuple[str, ...]  # the names taken from it ("*" for the module itself)
    line: int
    inner: bool  # inside a function
    explained: bool  # a comment on its line or the line above


@functools.cache
def parsed(text: str) -> ast.Module:
    """A module's syntax tree, parsed once however many checks read it (the planted tests change one module)."""
    return ast.parse(text)


def module_name(path: Path, package_root: Path) -> str:
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def gpukit_imports(module: str, text: str, modules: set[str]) -> list[Import]:
    """Every import of a gpukit module in ``text``, the source of ``module``; ``modules`` names every module."""
    return list(_imports_of(module, text, frozenset(modules)))


@functools.cache
def _imports_of(module: str, text: str, modules: frozenset[str]) -> tuple[Import, ...]:
    """gpukit_imports, read once per module text (the planted tests check the whole package again each)."""
    tree = parsed(text)
    lines = text.splitlines()
    package = module if module in modules and _is_package(module, modules) else module.rpartition(".")[0]
    inner_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f)}

    def explained(node) -> bool:
        here = lines[node.lineno - 1]
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        return "#" in here or above.startswith("#")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if not (base == "gpukit" or base.startswith("gpukit.")):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target, names = (sub, ("*",)) if sub in modules else (base, (alias.name,))
                found.append(Import(module, target, names, node.lineno, id(node) in inner_nodes, explained(node)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "gpukit" or alias.name.startswith("gpukit."):
                    found.append(Import(module, alias.name, ("*",), node.lineno, id(node) in inner_nodes,
                                        explained(node)))
    return tuple(found)


def _is_package(module: str, modules: set[str]) -> bool:
    return any(m.startswith(module + ".") for m in modules)


def private_attributes(text: str, imported_modules: dict[str, str]) -> list[tuple[str, str, int]]:
    """``alias._name`` where ``alias`` is a gpukit module imported whole: (module, name, line)."""
    found = []
    for node in ast.walk(parsed(text)):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in imported_modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            found.append((imported_modules[node.value.id], node.attr, node.lineno))
    return found


def problems_in(sources: dict[str, str]) -> list[str]:
    """What breaks the layering in ``sources``, a map of module name -> its text."""
    modules = set(sources)
    problems, edges = [], {}
    for module, text in sorted(sources.items()):
        own = layer_of(module)
        if own is None and module not in FRONT:
            problems.append(f"{module} belongs to no layer: put it in one of gpukit/{{{','.join(LAYERS)}}}/")
            continue
        imports = gpukit_imports(module, text, modules)
        whole = {}
        tree = parsed(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("gpukit.") and alias.asname:
                        whole[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    target = f"{node.module}.{alias.name}" if node.module else alias.name
                    if target in modules:
                        whole[alias.asname or alias.name] = target
        for imp in imports:
            where = f"{module}, line {imp.line}: imports {imp.target}"
            target = imp.target
            if target not in modules:
                problems.append(f"{where}, which is not a gpukit module")
                continue
            if module in FRONT:
                continue
            if target in FRONT:
                problems.append(f"{where} (the package's front): import from the module that defines "
                                f"{', '.join(imp.names)}")
                continue
            theirs = layer_of(target)
            if LAYERS.index(theirs) > LAYERS.index(own):
                problems.append(f"{where}: {own} may not import from {theirs}, a layer above it")
            elif own == theirs == "topics" and target.split(".")[2] != module.split(".")[2]:
                problems.append(f"{where}: one topic may not import another; move what they share down a layer")
            private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            if private and target != module:
                problems.append(f"{where}: the private name(s) {', '.join(private)}; make it public where it "
                                "belongs, or keep it where it is used")
            if imp.inner and not imp.explained:
                problems.append(f"{where} inside a function with no comment saying why: move it to the top of "
                                "the file, or say why it must wait (on its line or the line above)")
            if target != module and not (_is_package(target, modules) and module.startswith(target + ".")):
                edges.setdefault(module, set()).add(target)
        for target, name, line in private_attributes(text, whole):
            if target != module:
                problems.append(f"{module}, line {line}: uses {target}.{name}, a private name of another module")
    problems += [f"an import cycle: {' -> '.join(cycle)}" for cycle in cycles(edges)]
    return list(dict.fromkeys(problems))  # one line per problem, though an import names several things


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules (Tarjan's algorithm, iterative enough for gpukit)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group) + [sorted(group)[0]])

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def gpukit_sources(root: Path = ROOT) -> dict[str, str]:
    package = root / "gpukit"
    return {module_name(p, package): p.read_text(encoding="utf-8") for p in sorted(package.rglob("*.py"))}


def test_gpukit_keeps_its_layers():
    problems = problems_in(gpukit_sources())
    assert not problems, "gpukit's layers are broken:\n" + "\n".join(problems)


def test_every_layer_is_a_folder_with_a_docstring():
    for layer in LAYERS:
        init = ROOT / "gpukit" / layer / "__init__.py"
        assert init.is_file(), f"gpukit/{layer}/ is missing"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"gpukit/{layer}/__init__.py says " \
                                                                               "nothing of what the layer holds"


# ------------------------------------------------------------------ the checker finds what it is for
@pytest.fixture(scope="module")
def real() -> dict[str, str]:
    return gpukit_sources()


def planted(real: dict[str, str], module: str, line: str) -> list[str]:
    sources = dict(real)
    sources[module] = line + "\n" + sources[module]
    return problems_in(sources)


def test_an_upward_import_is_found(real):
    found = planted(real, "gpukit.core.timing", "from gpukit.commands.doctor import environment_report")
    assert any("core may not import from commands" in p for p in found), found


def test_an_import_across_topics_is_found(real):
    found = planted(real, "gpukit.topics.slurm", "from gpukit.topics.clusters import dask_cluster")
    assert any("one topic may not import another" in p for p in found), found


def test_a_cycle_is_found(real):
    found = planted(real, "gpukit.base.paths", "from gpukit.base.units import human_bytes")
    assert not any("cycle" in p for p in found), found  # base imports base: allowed, and no cycle yet
    sources = dict(real)
    sources["gpukit.base.units"] = "from gpukit.base.paths import state_dir\n" + sources["gpukit.base.units"]
    sources["gpukit.base.paths"] = "from gpukit.base.units import human_bytes\n" + sources["gpukit.base.paths"]
    found = problems_in(sources)
    assert any("cycle" in p and "gpukit.base.paths" in p and "gpukit.base.units" in p for p in found), found


def test_a_private_name_from_another_module_is_found(real):
    found = planted(real, "gpukit.measuring.sweep", "from gpukit.core.arrays import _secret")
    assert any("private name(s) _secret" in p for p in found), found
    found = planted(real, "gpukit.measuring.sweep", "from gpukit.core import arrays\narrays._secret()")
    assert any("gpukit.core.arrays._secret" in p for p in found), found


def test_an_unexplained_import_in_a_function_is_found(real):
    body = "def f():\n    from gpukit.base.units import human_bytes\n    return human_bytes\n"
    found = planted(real, "gpukit.measuring.sweep", body)
    assert any("inside a function with no comment" in p for p in found), found
    explained = "def f():\n    # lazy: f runs rarely\n    from gpukit.base.units import human_bytes\n"
    assert not any("inside a function" in p for p in planted(real, "gpukit.measuring.sweep", explained))


def test_the_front_door_and_flat_modules_are_found(real):
    found = planted(real, "gpukit.core.device", "from gpukit import check")
    assert any("the package's front" in p for p in found), found
    sources = dict(real, **{"gpukit.helpers": "x = 1\n"})
    assert any("gpukit.helpers belongs to no layer" in p for p in problems_in(sources))


# ------------------------------------------------------------------ the three products
# What each folder's Python may import of the book's own code: gpukit is what a learner's kernel imports and stands
# alone; booktools (the book's machinery) uses gpukit; the site build and the scripts use both. The tests may import
# anything, and nothing imports them. _ext's and scripts' modules import their neighbours by bare name (Sphinx and
# `python scripts/x.py` put their folder on sys.path).
MAY_IMPORT = {"gpukit": {"gpukit"}, "booktools": {"gpukit", "booktools"}, "_ext": {"gpukit", "booktools", "_ext"},
              "scripts": {"gpukit", "booktools", "scripts"}}
OURS = ("gpukit", "booktools", "_ext", "scripts", "tests", "conftest")


def product_problems(sources: dict[tuple[str, str], str], neighbours: dict[str, set[str]]) -> list[str]:
    """Each import of the book's own code that runs against :data:`MAY_IMPORT`. ``sources`` maps (folder, file) to
    the file's text; ``neighbours`` maps a folder to its modules' bare names."""
    problems = []
    for (folder, file), text in sorted(sources.items()):
        for line, name in absolute_imports(text):
            top = name.split(".")[0]
            owner = folder if top in neighbours.get(folder, ()) and folder in ("_ext", "scripts") else top
            if owner in OURS and owner not in MAY_IMPORT[folder]:
                problems.append(f"{folder}/{file}, line {line}: imports {name}, but {folder} may import only "
                                f"{', '.join(sorted(MAY_IMPORT[folder]))}")
    return problems


@functools.cache
def absolute_imports(text: str) -> tuple[tuple[int, str], ...]:
    """(line, module) of each absolute import in ``text`` (a relative one stays within its own package)."""
    found = []
    for node in ast.walk(parsed(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or ""))
    return tuple(found)


def product_sources(root: Path = ROOT) -> tuple[dict[tuple[str, str], str], dict[str, set[str]]]:
    sources, neighbours = {}, {}
    for folder in MAY_IMPORT:
        files = sorted((root / folder).rglob("*.py"))
        neighbours[folder] = {p.stem for p in files if p.parent == root / folder}
        sources.update({(folder, str(p.relative_to(root / folder))): p.read_text(encoding="utf-8") for p in files})
    return sources, neighbours


def test_the_products_import_downwards():
    sources, neighbours = product_sources()
    assert {folder for folder, _ in sources} == set(MAY_IMPORT), "a product's folder has no Python"
    problems = product_problems(sources, neighbours)
    assert not problems, "the book's products import upwards:\n" + "\n".join(problems)


@pytest.mark.parametrize(("path", "line", "expected"), [
    ("gpukit/core/timing.py", "from booktools.gpu_runs import load_gpu_runs", "gpukit may import only gpukit"),
    ("gpukit/exercises/checking.py", "import tests.support.booktoc", "imports tests.support.booktoc"),
    ("booktools/bench.py", "import scripts.drift", "booktools may import only booktools, gpukit"),
    ("booktools/gpu_check.py", "from _ext.gpu_runs import kept_runs", "imports _ext.gpu_runs"),
    ("scripts/drift.py", "from tests.support.booktoc import ROOT", "imports tests.support.booktoc"),
    ("_ext/gpu_runs.py", "import tests.support.site_build", "imports tests.support.site_build"),
    ("scripts/execute_notebooks.py", "import gpu_runs", None),  # _ext's module's name, but not ours from here
])
def test_an_upward_import_between_products_is_found(path, line, expected):
    folder, file = path.split("/", 1)
    sources, neighbours = product_sources()
    assert (folder, file) in sources, f"{folder}/{file} is gone: plant the import elsewhere"
    sources[(folder, file)] = line + "\n" + sources[(folder, file)]
    found = product_problems(sources, neighbours)
    assert (any(expected in p for p in found) if expected else not found), found
