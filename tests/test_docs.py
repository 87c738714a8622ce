"""The docs name only what exists (issue 29: "docs for their three readers").

docs/HANDOFF.md is read by people changing the code: every file, module and class member it
names must be there, or a newcomer follows it into nothing (it named `commands/assemble.py` long
after the file was gone). docs/USING.md is read by users: every command, flag and setting it
names must exist, and the stop phrase it teaches must be the default wake phrase's. Links between
the docs must land on a heading. Nothing is imported but the command line's parser and the
settings' defaults.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SKIP = {".venv", ".venv-satellite", ".git", "node_modules", "__pycache__", ".cache"}


def _source_files() -> list[Path]:
    return [p for p in REPO.rglob("*.py") if not SKIP.intersection(p.relative_to(REPO).parts)]


def _project_roots() -> set[str]:
    """Top-level packages and modules of the repository (what a dotted name may start with)."""
    return {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()} | {p.stem for p in REPO.glob("*.py")}


# --- file paths ---------------------------------------------------------------------------------

PY_PATH = re.compile(r"(?<![\w./-])([\w./-]*\w\.py)\b")


def missing_py_paths(text: str, repo: Path, every_file: list[Path]) -> list[str]:
    """`.py` paths named in `text` that do not exist: `a/b.py` relative to the repository, a bare
    `b.py` anywhere in it."""
    names = {p.name for p in every_file}
    missing = []
    for path in sorted(set(PY_PATH.findall(text))):
        if "/" in path:
            if not (repo / path).is_file():
                missing.append(path)
        elif path not in names:
            missing.append(path)
    return missing


def test_handoff_md_names_only_python_files_that_exist() -> None:
    text = (DOCS / "HANDOFF.md").read_text()
    assert missing_py_paths(text, REPO, _source_files()) == []


def test_the_path_check_finds_a_stale_path(tmp_path: Path) -> None:
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "run.py").write_text("")
    files = [tmp_path / "commands" / "run.py"]
    text = "built in `commands/assemble.py`, run by commands/run.py and `run.py`; see gone.py."
    assert missing_py_paths(text, tmp_path, files) == ["commands/assemble.py", "gone.py"]


# --- dotted names and class members -------------------------------------------------------------

DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)")
MEMBER = re.compile(r"\b([A-Z][A-Za-z0-9]+)\.(_?[a-z][A-Za-z0-9_]*)\b")


def _defines(source: str, name: str) -> bool:
    """A module defines `name`: a function, class or assignment anywhere in it (a dataclass field
    too), or an import of it (a module that re-exports what moved next door still has it)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name).split(".")[-1] == name for a in node.names):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def stale_dotted_names(text: str, repo: Path, roots: set[str]) -> list[str]:
    """`package.module.Name` in backticks whose module is not there or does not define Name."""
    stale = []
    for dotted in sorted(set(DOTTED.findall(text))):
        parts = dotted.split(".")
        if parts[0] not in roots or parts[-1] in ("py", "md", "toml", "txt", "json", "db"):
            continue
        for cut in range(len(parts), 0, -1):
            base = repo.joinpath(*parts[:cut])
            found = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            if found.is_file():
                break
        else:
            stale.append(dotted)
            continue
        rest = parts[cut:]
        if rest and not _defines(found.read_text(), rest[0]):
            stale.append(dotted)
    return stale


def stale_members(text: str, sources: dict[Path, str]) -> list[str]:
    """`Class.member` whose class the product defines but whose file never mentions the member
    (the coordinator's `_held` after the lifecycle replaced it)."""
    stale = []
    for cls, member in sorted(set(MEMBER.findall(text))):
        owners = [s for s in sources.values() if re.search(rf"^class {cls}\b", s, re.M)]
        if owners and not any(re.search(rf"\b{member}\b", s) for s in owners):
            stale.append(f"{cls}.{member}")
    return stale


@pytest.mark.parametrize("doc", ["HANDOFF.md", "PERFORMANCE.md"])
def test_the_modules_and_members_a_doc_names_exist(doc: str) -> None:
    text = (DOCS / doc).read_text()
    sources = {p: p.read_text() for p in _source_files() if "tests" not in p.relative_to(REPO).parts[:1]}
    assert stale_dotted_names(text, REPO, _project_roots()) == []
    assert stale_members(text, sources) == []


def test_the_name_checks_find_stale_names(tmp_path: Path) -> None:
    (tmp_path / "decisions").mkdir()
    (tmp_path / "decisions" / "__init__.py").write_text("")
    core = "from decisions.machines import (\n    Table,\n    Machines,\n)\nclass CoordinatorCore:\n    def handle(self):\n        self.routing = 1\n"
    (tmp_path / "decisions" / "coordinator.py").write_text(core)
    text = "`decisions.coordinator.CoordinatorCore`, `decisions.coordinator.Gone`, `decisions.nothing.X`, `os.path`, " \
           "`decisions.coordinator.Machines`"
    assert stale_dotted_names(text, tmp_path, {"decisions"}) == ["decisions.coordinator.Gone", "decisions.nothing.X"]
    text = "`CoordinatorCore.handle`, `CoordinatorCore._held`, `NotOurs.x`"
    assert stale_members(text, {tmp_path / "c.py": core}) == ["CoordinatorCore._held"]


# --- links between the docs ---------------------------------------------------------------------


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a document's headings (lower case, punctuation dropped, spaces to -)."""
    found = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


LINK = re.compile(r"\]\(((?:[A-Z]+\.md)?)(#[^)\s]+)?\)")


def broken_links(name: str, docs: dict[str, str]) -> list[str]:
    broken = []
    for target, anchor in LINK.findall(docs[name]):
        doc = target or name
        if doc not in docs:
            broken.append(f"{target}{anchor}")
        elif anchor and anchor[1:] not in anchors(docs[doc]):
            broken.append(f"{target}{anchor}")
    return broken


def test_links_between_the_docs_land_on_a_heading() -> None:
    docs = {p.name: p.read_text() for p in DOCS.glob("*.md")}
    docs["README.md"] = (REPO / "README.md").read_text()
    assert {name: broken for name in docs if (broken := broken_links(name, docs))} == {}


def test_the_link_check_finds_a_missing_heading() -> None:
    docs = {"A.md": "# Stop while talking, in detail\n[x](#stop-while-talking-in-detail) [y](B.md#gone)",
            "B.md": "## Cost (issue 2)\n[z](A.md#stop-while-talking-in-detail) [w](B.md#cost-issue-2)"}
    assert broken_links("A.md", docs) == ["B.md#gone"]
    assert broken_links("B.md", docs) == []


# --- the user's guide ---------------------------------------------------------------------------


def _subcommands() -> dict[str, set[str]]:
    """Each `handoff` subcommand and every option it (or one of its actions) takes."""
    from commands.cli import build_parser

    def options(parser: argparse.ArgumentParser) -> set[str]:
        found = set(parser._option_string_actions)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found |= options(sub)
        return found

    parser = build_parser(None)
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: options(sub) for name, sub in subparsers.choices.items()}


COMMAND = re.compile(r"(?:`|^\$ )(?:handoff|\./run) ([a-z][a-z-]*)([^`\n]*)", re.M)


def unknown_commands(text: str, commands: dict[str, set[str]]) -> list[str]:
    unknown = []
    for name, rest in COMMAND.findall(text):
        if name not in commands:
            unknown.append(name)
            continue
        unknown += [f"{name} {flag}" for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest) if flag not in commands[name]]
    return unknown


def test_every_command_and_flag_the_users_guide_names_exists() -> None:
    text = (DOCS / "USING.md").read_text() + (REPO / "README.md").read_text()
    assert unknown_commands(text, _subcommands()) == []


def test_the_command_check_finds_what_is_not_there() -> None:
    commands = {"say": {"--room"}, "status": set()}
    text = "`handoff say --room kitchen hi`, `handoff says`, `./run status --json`\n$ handoff say --loud x"
    assert unknown_commands(text, commands) == ["says", "status --json", "say --loud"]


SYSTEMD_NAMES = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "READY", "STATUS", "STOPPING", "WATCHDOG"}
PLACEHOLDERS = {"NAME", "PARAM"}  # `handoff tasks start NAME [PARAM=VALUE...]`


def unknown_settings(text: str, settings: set[str]) -> list[str]:
    """Names in backticks that look like settings (`UPPER_CASE`, or `NAME=value`) and are not."""
    named = set(re.findall(r"`([A-Z][A-Z0-9]*_[A-Z0-9_]+)(?:=[^`]*)?`", text))
    named |= set(re.findall(r"`([A-Z][A-Z0-9_]{2,})=[^`]*`", text))
    return sorted(named - settings - SYSTEMD_NAMES - PLACEHOLDERS)


def test_every_setting_the_users_guide_names_exists() -> None:
    from config.settings import ENV_DEFAULTS

    # The scripts' own variables (`./test`'s HANDOFF_TEST_WORKERS, `./run`'s HANDOFF_PYTHON) count too.
    scripts = "".join(p.read_text() for p in [REPO / "run", REPO / "test", *(REPO / "scripts").glob("*.sh")])
    read_by_scripts = set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", scripts))
    text = (DOCS / "USING.md").read_text() + (REPO / "README.md").read_text()
    assert unknown_settings(text, set(ENV_DEFAULTS) | read_by_scripts) == []


def test_the_setting_check_finds_a_setting_that_is_not_there() -> None:
    text = "`WAKE_PHRASE`, `WAKE_WORDS`, `SATELLITES=kitchen=tcp://x`, `LOUD=1`, `PT10M`, `READY=1`"
    assert unknown_settings(text, {"WAKE_PHRASE", "SATELLITES"}) == ["LOUD", "WAKE_WORDS"]


def test_the_users_guide_teaches_the_stop_phrase_of_the_default_wake_phrase() -> None:
    """The stop phrase is the wake phrase followed by a stop word (detectors/stop_phrase.py);
    under the default "hey jarvis" the guide must not teach "computer, stop"."""
    from config.settings import ENV_DEFAULTS, ListenerSettings

    text = (DOCS / "USING.md").read_text().lower()
    default = ENV_DEFAULTS["WAKE_PHRASE"]
    assert f"{default}, {ListenerSettings.stop_words[0]}" in text
    for other in ("computer", "alexa", "okay nabu", "hey mycroft"):
        if other != default:
            assert f"{other}, stop" not in text, other


def test_the_users_guide_is_for_users() -> None:
    """No source files, test files or database columns: those are HANDOFF.md's."""
    text = (DOCS / "USING.md").read_text()
    assert PY_PATH.findall(text) == []
    assert "tests/" not in text and "columns" not in text


# --- sections named from the code ---------------------------------------------------------------

SECTION_REFERENCE = re.compile(r'\b(HANDOFF|USING|PERFORMANCE)\.md\)?[,:]?\s*\(?"([A-Z][^"]{0,80})"')


def missing_sections(text: str, docs: dict[str, str]) -> list[str]:
    """`docs/X.md, "Title"` (or `X.md ("Title")`) whose document has no heading starting so."""
    missing = []
    for name, title in SECTION_REFERENCE.findall(text):
        wanted = " ".join(title.split()).lower()
        headings = [" ".join(line.lstrip("#").split()).lower() for line in docs[f"{name}.md"].splitlines() if line.startswith("#")]
        if not any(heading.startswith(wanted) for heading in headings):
            missing.append(f'{name}.md "{title}"')
    return missing


def test_sections_named_in_the_code_and_the_docs_exist() -> None:
    docs = {p.name: p.read_text() for p in DOCS.glob("*.md")}
    places = [p for p in _source_files() if p.name != "test_docs.py"] + [REPO / ".env.example", *DOCS.glob("*.md"), REPO / "README.md"]
    found = {str(p.relative_to(REPO)): missing for p in places if (missing := missing_sections(p.read_text(), docs))}
    assert found == {}


def test_the_section_check_finds_a_moved_section() -> None:
    docs = {"HANDOFF.md": "## Stop phrase and barge-in\n", "PERFORMANCE.md": "## Echo gate (`x`)\n", "USING.md": ""}
    text = 'a (docs/HANDOFF.md, "Echo suppression"); b docs/HANDOFF.md ("Stop phrase"); c PERFORMANCE.md, "Echo\ngate"'
    assert missing_sections(text, docs) == ['HANDOFF.md "Echo suppression"']
