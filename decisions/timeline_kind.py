"""What a timeline entry is about: the first word of its log line (`decisions.timeline`)."""

from __future__ import annotations

import enum


class TimelineKind(enum.StrEnum):
    HEARD = "heard"  # a command-shaped utterance
    IGNORED = "ignored"  # not addressed to us
    WAKE = "wake"  # the wake phrase alone
    CHIME = "chime"
    FOLLOW_UP = "follow-up"  # an answer was said: a follow-up needs no wake phrase for a moment
    WORKING = "working"  # an answer is late: the working sound plays
    COMMAND = "command"  # routed to the model
    CONFIRMED = "confirmed"  # routed by its audio: the transcript confirmed it, with these words
    SAID = "said"  # the answer said before its command was confirmed, once it is (for history)
    WITHDRAWN = "withdrawn"  # routed by its audio: the transcript says it was not addressed; nothing acts
    STAGES = "stages"  # a command's stage offsets (JSON; decisions.stages), logged at debug
    TOOL = "tool"
    RESULT = "result"  # a tool finished: "name ok: what it found" (as the log always said it)
    FALLBACK = "fallback"  # no tool call: the model's text is narrated
    NARRATING = "narrating"
    NARRATED = "narrated"
    STOPPED = "stopped"  # "computer, stop" cut a narration
    NOTICE = "notice"
    LISTENING = "listening"
    RESTARTING = "restarting"
    REPLAYING = "replaying"
    MICROPHONE = "microphone"
    ERROR = "error"
    DISMISSED = "dismissed"  # the command asked for nothing ("stop", "never mind"): nothing ran or was said
    ASKING = "asking"  # a tool that cannot be undone waits for a spoken yes
    CLOSED = "closed"  # a command's life is over (decisions.lifecycle): what the history keeps
