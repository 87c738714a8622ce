"""The package layout's rules, checked on the source with `ast` (nothing is imported).

Rules:
- No import circles among project modules, counting *every* import: at module level, inside a
  function (it runs later, but the two modules still need each other, and a lazily imported
  subcommand must not close a circle either), and under `if TYPE_CHECKING:` (it never runs, but
  a type one module needs from another is still a dependency of the first on the second; a
  circle through one is two modules that cannot be read or changed apart). Importing `a.b.c`
  also imports the packages `a` and `a.b` (their `__init__` runs), so those count as imported
  as well.
- The command line is the top layer: no module of the product outside `commands/` imports it
  (the rooms hub and the page build on `assembly`, not on a subcommand; benchmarks may).
- Nothing under `decisions/` may import asyncio, openai, websockets or aiohttp, directly or
  through any chain of project modules. For this rule *every* runtime import counts (also those
  inside functions: they run when the decision code is used); only `TYPE_CHECKING` imports are
  exempt.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", ".venv-satellite", ".git", "__pycache__", "tests", "node_modules", ".ci", "scripts"}
FORBIDDEN_IN_DECISIONS = frozenset({"asyncio", "openai", "websockets", "aiohttp"})


@dataclass
class ModuleImports:
    module_level: set[str] = field(default_factory=set)  # runtime imports outside any function
    runtime: set[str] = field(default_factory=set)  # every import that can run (not TYPE_CHECKING)
    every: set[str] = field(default_factory=set)  # runtime and TYPE_CHECKING imports alike


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_files() -> dict[str, Path]:
    files = {}
    for path in REPO.rglob("*.py"):
        if SKIP_DIRS.intersection(path.relative_to(REPO).parts[:-1]):
            continue
        files[module_name(path)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    # `from pkg import name` may import the submodule pkg.name: record both, unknown ones drop out.
    return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names if alias.name != "*"]


@functools.cache  # the rules below read every file's imports: parse each once per process
def parse_imports(module: str, path: Path) -> ModuleImports:
    tree = ast.parse(path.read_text(), filename=str(path))
    result = ModuleImports()
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, in_function: bool, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, in_function, True)
            for child in node.orelse:  # the else branch does run
                visit(child, in_function, type_only)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else _resolve_from(module, is_package, node)
            )
            result.every.update(names)
            if type_only:
                return
            result.runtime.update(names)
            if not in_function:
                result.module_level.update(names)
            return
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside, type_only)

    visit(tree, False, False)
    return result


def with_parents(name: str) -> list[str]:
    """`a.b.c` -> ['a', 'a.b', 'a.b.c']: importing a module runs its packages' __init__ first."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def build_graph(kind: str) -> dict[str, set[str]]:
    """module -> the project modules it imports (`kind`: 'module_level', 'runtime' or 'every')."""
    files = project_files()
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        imported = getattr(parse_imports(module, path), kind)
        targets = {parent for name in imported for parent in with_parents(name) if parent in files}
        targets.discard(module)
        # A package's own parents are not an import of it (a.b runs a/__init__ anyway).
        graph[module] = targets - set(with_parents(module))
    return graph


def external_imports() -> dict[str, set[str]]:
    """module -> the top-level names of everything it imports at runtime (project or not)."""
    files = project_files()
    return {m: {name.split(".")[0] for name in parse_imports(m, p).runtime} for m, p in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None. Iterative DFS with colours."""
    white, grey, black = 0, 1, 2
    colour = {node: white for node in graph}
    for root in sorted(graph):
        if colour[root] != white:
            continue
        stack: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        path = [root]
        colour[root] = grey
        while stack:
            node, pending = stack[-1]
            if not pending:
                stack.pop()
                path.pop()
                colour[node] = black
                continue
            nxt = pending.pop(0)
            if colour.get(nxt, black) == grey:
                return path[path.index(nxt):] + [nxt]
            if colour.get(nxt) == white:
                colour[nxt] = grey
                path.append(nxt)
                stack.append((nxt, sorted(graph.get(nxt, ()))))
    return None


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str | None]:
    """Every module reachable from `start`, mapped to the module that imported it first."""
    seen: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in seen:
                seen[nxt] = node
                queue.append(nxt)
    return seen


def chain(seen: dict[str, str | None], end: str) -> list[str]:
    path = [end]
    while seen[path[-1]] is not None:
        path.append(seen[path[-1]])  # type: ignore[arg-type]
    return path[::-1]


# --- the rules -----------------------------------------------------------------------------------


def test_the_project_has_no_import_circles() -> None:
    graph = build_graph("every")
    assert {"handoff", "main_agent", "decisions.timeline", "commands.cli"} <= set(graph), "project files not found"
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_every_product_file_is_under_600_lines() -> None:
    """A file past 600 lines has more than one thing in it: split it along its seams."""
    sizes = {name: len(path.read_text().splitlines()) for name, path in project_files().items()
             if not name.startswith(("tests.", "benchmarks."))}
    assert len(sizes) > 100, "project files not found"
    assert {name: lines for name, lines in sizes.items() if lines >= 600} == {}


def test_only_the_command_line_imports_the_command_line() -> None:
    graph = build_graph("every")
    below = [m for m in graph if m.split(".")[0] not in {"commands", "benchmarks"}]
    assert {"rooms.hub", "web.daemon", "handoff", "assembly.build"} <= set(below), below
    offenders = sorted(f"{m} -> {d}" for m in below for d in graph[m] if d.split(".")[0] == "commands")
    assert not offenders, "the command line imported from below it: " + ", ".join(offenders)


def test_decisions_never_reach_async_or_network_libraries() -> None:
    graph = build_graph("runtime")
    externals = external_imports()
    decision_modules = [m for m in graph if m == "decisions" or m.startswith("decisions.")]
    assert len(decision_modules) >= 8, decision_modules
    problems = []
    for module in decision_modules:
        seen = reachable(graph, module)
        for dependency in seen:
            bad = externals.get(dependency, set()) & FORBIDDEN_IN_DECISIONS
            for name in sorted(bad):
                problems.append(" -> ".join(chain(seen, dependency) + [name]))
    assert not problems, "decision code reaches async/network libraries:\n" + "\n".join(problems)


def test_no_flat_modules_are_left_at_the_top_level() -> None:
    top = {p.stem for p in REPO.glob("*.py")}
    assert top == {"main_agent", "reader_agent", "brain", "handoff"}, top


# --- the checker itself --------------------------------------------------------------------------


def test_the_cycle_finder_reports_a_cycle_and_accepts_a_dag() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a2"}, "a2": set(), "x": {"y"}, "y": {"x"}}) == ["x", "y", "x"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_import_parsing_separates_module_level_function_and_type_checking_imports(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from __future__ import annotations\n"
        "import asyncio\n"
        "from typing import TYPE_CHECKING\n"
        "from decisions import words\n"
        "from .sibling import thing\n"
        "if TYPE_CHECKING:\n"
        "    from handoff import Coordinator\n"
        "try:\n"
        "    import openai\n"
        "except ImportError:\n"
        "    pass\n"
        "def late():\n"
        "    import websockets\n"
        "    from commands import demo\n"
    )
    parsed = parse_imports("pkg.sample", source)
    assert {"asyncio", "decisions", "decisions.words", "pkg.sibling", "pkg.sibling.thing", "openai"} <= parsed.module_level
    assert "websockets" not in parsed.module_level and "commands.demo" not in parsed.module_level
    assert {"websockets", "commands.demo"} <= parsed.runtime
    assert "handoff" not in parsed.runtime and "handoff" not in parsed.module_level
    assert {"handoff", "websockets", "commands.demo", "asyncio"} <= parsed.every


def test_a_circle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    """The circle issue 24 found: checks -> run (inside a function) -> demo -> checks."""
    (tmp_path / "a.py").write_text("def late():\n    import b\n")
    (tmp_path / "b.py").write_text("import a\n")
    graph = {name: {n for n in parse_imports(name, tmp_path / f"{name}.py").every if n in ("a", "b")} for name in "ab"}
    assert find_cycle(graph) == ["a", "b", "a"]


def test_a_decision_reaching_asyncio_through_another_module_is_found() -> None:
    graph = {"decisions.x": {"helpers"}, "helpers": {"more"}, "more": set()}
    seen = reachable(graph, "decisions.x")
    assert chain(seen, "more") == ["decisions.x", "helpers", "more"]


def test_every_package_is_installed_with_the_project():
    """`./run` starts the installed `handoff` command: a package left out of pyproject.toml's list
    imports in the tests (they run from the source tree) and fails for every user."""
    import fnmatch
    import tomllib

    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = sorted(p.parent.name for p in REPO.glob("*/__init__.py"))
    assert packages, "no packages found"
    left_out = [
        name for name in packages
        if not any(fnmatch.fnmatch(name, pattern) for pattern in found["include"])
        and not any(fnmatch.fnmatch(name, pattern) for pattern in found["exclude"])
    ]
    assert left_out == []


# --- nobody parses a log line back (issue 29) ---------------------------------------------------------

TEXT_PARSING = frozenset({"startswith", "endswith", "split", "rsplit", "partition", "rpartition", "removeprefix",
                          "removesuffix", "find", "index"})
RENDERERS = {"decisions.timeline", "decisions.events"}  # where an event's words are made


def _is_entry_text(node: ast.expr) -> bool:
    """`entry.text`, `e.text`, `x.entry.text`: a timeline entry's rendering."""
    if not (isinstance(node, ast.Attribute) and node.attr == "text"):
        return False
    owner = node.value
    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    return name in ("e", "entry", "item") or name.endswith("entry")


def text_parsing_in(source: str) -> list[int]:
    """Lines that read meaning back out of a timeline entry's words."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TEXT_PARSING \
                and _is_entry_text(node.func.value):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "loads" \
                and node.args and _is_entry_text(node.args[0]):
            found.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq)) for op in node.ops) \
                and any(_is_entry_text(c) for c in (node.left, *node.comparators)):
            found.append(node.lineno)
    return found


def test_no_module_reads_meaning_back_out_of_a_log_line() -> None:
    """History, status, the page and /metrics match on typed events (decisions.events), never on
    the words of a timeline entry: a change of wording must not change what they show."""
    offenders = {name: lines for name, path in project_files().items()
                 if name not in RENDERERS and (lines := text_parsing_in(path.read_text()))}
    assert offenders == {}


def test_the_log_text_check_finds_what_it_is_for() -> None:
    assert text_parsing_in('if entry.text.startswith("listener connection dropped"): pass') == [1]
    assert text_parsing_in('stopped = "(stopped after" in entry.text') == [1]
    assert text_parsing_in('kind = e.text.split(" ", 1)[0]') == [1]
    assert text_parsing_in('x = json.loads(entry.text)') == [1]
    assert text_parsing_in('words = utterance.text.split()') == []


# What decisions/ may import from the project, as docs/HANDOFF.md's layout table says (its row is
# checked against this set too).
DECISIONS_MAY_IMPORT = frozenset({"realtime_api.wire", "realtime_api.fatal", "config.settings", "config.wake_phrases",
                                  "safety.text", "speech.speakable"})


def test_decisions_import_only_what_the_layout_table_allows() -> None:
    graph = build_graph("every")
    files = project_files()
    offenders = sorted(f"{m} -> {d}" for m in graph if m.split(".")[0] == "decisions" for d in graph[m]
                       if d.split(".")[0] != "decisions" and d not in DECISIONS_MAY_IMPORT
                       and not (d in files and files[d].name == "__init__.py"))  # fmt: skip
    assert not offenders, offenders
    row = next(line for line in (REPO / "docs" / "HANDOFF.md").read_text().splitlines() if line.startswith("| `decisions/`"))
    allowed_in_docs = row.rsplit("|", 2)[-2]
    assert all(f"`{name}`" in allowed_in_docs for name in DECISIONS_MAY_IMPORT), allowed_in_docs
