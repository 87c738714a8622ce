"""A command that asks for nothing: "hey jarvis, stop", "never mind", "cancel" with nothing after.

The router must call a tool for every command (`tool_choice: "required"`), so before this it
answered "stop" with whatever fitted least badly (the brain's thoughts on the word "stop", an
echo of it): a wrong answer, said. That happens wherever a stop reaches the router: a barge-in
whose hold could not tell a slow "hey jarvis, stop" from "hey jarvis" and a pause (the narration
is already cut at the hit, so all the user wants is silence), the follow-up window after an
answer, a quiet room. So the router is offered one more tool, `dismiss`; a response whose calls
are all `dismiss` moves its command to `dismissed` (decisions.lifecycle): nothing runs, nothing
is said, the working sound stops, and the command is kept in the history as asked.
"""

from __future__ import annotations

from collections.abc import Iterable

from realtime_api.wire import FunctionCall

DISMISS_TOOL = "dismiss"
DISMISS_DESCRIPTION = (
    "The user only told the assistant to stop, cancel, be quiet or never mind, and asked for nothing "
    "else. Nothing is done and nothing is said."
)


def dismisses(calls: Iterable[FunctionCall]) -> bool:
    """The model's response asks for nothing: every call it made (at least one) is `dismiss`."""
    names = [call.name for call in calls]
    return bool(names) and all(name == DISMISS_TOOL for name in names)
