"""An unknown option after a `tasks` action is that action's to report, with its usage (issue 28,
item 12): `tasks start x --bogus` showed `tasks`' usage instead of `tasks start`'s."""

from __future__ import annotations

import pytest

from commands import cli
from tests.commands.test_checks import home  # noqa: F401  (the fixture: a clean environment)


@pytest.mark.parametrize(("argv", "usage"), [
    (["tasks", "start", "x", "--bogus"], "handoff tasks start"),
    (["tasks", "show", "1", "--bogus"], "handoff tasks show"),
    (["tasks", "cancel", "1", "--bogus"], "handoff tasks cancel"),
    (["tasks", "--bogus"], "handoff tasks"),
])  # fmt: skip
def test_an_unknown_flag_after_a_tasks_action_gets_the_actions_usage(home, capsys, argv: list[str], usage: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith(f"usage: {usage} [-h]") and err.endswith(f"{usage}: error: unrecognized arguments: --bogus\n"), err
