import pytest

from decisions.wake_gate import Command, Ignore, WakeGate, WakeOnly


@pytest.mark.parametrize(
    "transcript, command",
    [
        ("Computer, what time is it?", "what time is it?"),
        ("computer. list the files", "list the files"),
        ("COMPUTER: echo hello", "echo hello"),
        ("Hey computer, ask the brain why the sky is blue.", "ask the brain why the sky is blue."),
        ("Okay computer start the backup task", "start the backup task"),
        ("  computer!  cancel the backup ", "cancel the backup"),
    ],
)
def test_addressed_utterances_become_commands(transcript, command):
    assert WakeGate("computer").classify(transcript, now=0.0) == Command(command)


@pytest.mark.parametrize(
    "transcript",
    [
        "I left my computer at work",
        "what time is it",
        "the computer, he said, was slow",
        "computation is hard",
        "",
        "...",
    ],
)
def test_unaddressed_utterances_are_ignored(transcript):
    assert WakeGate("computer").classify(transcript, now=0.0) == Ignore()


def test_aliases_and_multiword_phrases():
    gate = WakeGate("hey handoff", aliases=("komputer",))
    assert gate.classify("Hey, Handoff: what time is it", 0) == Command("what time is it")
    assert gate.classify("komputer, echo hi", 0) == Command("echo hi")
    assert gate.classify("handoff what time is it", 0) == Ignore()


def test_wake_only_opens_a_window_for_the_next_utterance():
    gate = WakeGate("computer", window_s=8.0)
    assert gate.classify("Computer.", now=100.0) == WakeOnly()
    assert gate.window_open
    assert gate.classify("what time is it", now=107.9) == Command("what time is it", via_window=True)
    # The window is used up by that command.
    assert gate.classify("and the date?", now=108.0) == Ignore()


def test_window_expires():
    gate = WakeGate("computer", window_s=8.0)
    gate.classify("computer", now=0.0)
    assert gate.classify("what time is it", now=8.5) == Ignore()
    assert not gate.window_open


def test_noise_does_not_consume_an_open_window():
    gate = WakeGate("computer", window_s=8.0)
    gate.classify("computer", now=0.0)
    assert gate.classify("", now=1.0) == Ignore()
    assert gate.classify("list the files", now=2.0) == Command("list the files", via_window=True)


def test_an_empty_wake_phrase_is_refused():
    with pytest.raises(ValueError):
        WakeGate("!!!")


@pytest.mark.parametrize(
    "phrase, transcript, command",
    [
        ("компьютер", "Компьютер, который час?", "который час?"),
        ("компьютер", "Эй, компьютер: покажи файлы", "покажи файлы"),
        ("コンピューター", "コンピューター、今何時", "今何時"),
        ("υπολογιστή", "Υπολογιστή, τι ώρα είναι;", "τι ώρα είναι;"),
        ("ordinateur", "Ordinateur, quelle heure est-il ?", "quelle heure est-il ?"),
        ("kompjuter", "Kompjüter, wie spät", "wie spät"),  # accents fold on both sides
    ],
)
def test_wake_phrases_in_any_script(phrase, transcript, command):
    gate = WakeGate(phrase, aliases=("эй компьютер",) if phrase == "компьютер" else ())
    assert gate.classify(transcript, now=0.0) == Command(command)
    assert gate.classify(f"{phrase.capitalize()}.", now=0.0) == WakeOnly()


def test_typographic_apostrophes_are_apostrophes():
    from decisions.words import words

    assert words("What’s up, Café") == words("what's up, cafe") == ["what's", "up", "cafe"]


def test_a_phrase_without_letters_or_digits_is_refused():
    with pytest.raises(ValueError, match="no letters or digits"):
        WakeGate("!!!")


def test_a_follow_up_window_takes_only_what_was_begun_after_the_answer():
    gate = WakeGate("computer")
    gate.open_window(until=16.0, since=10.0)  # the answer ended at 10 s
    assert gate.classify("and the grass is green", now=9.5) == Ignore()  # begun while it was said
    assert gate.classify("what about tomorrow", now=11.0) == Command("what about tomorrow", via_window=True)


def test_a_phrase_with_a_model_is_accepted_as_transcribers_write_it():
    jarvis = WakeGate("hey jarvis")
    assert jarvis.classify("Hey, Jarvis.", 0.0) == WakeOnly()
    assert jarvis.classify("Hey Jarvis, what time is it?", 1.0) == Command("what time is it?")
    assert jarvis.classify("Hi Jarvis, list the files", 2.0) == Command("list the files")
    assert jarvis.classify("Hey Chavez, what time is it?", 3.0) == Ignore()
    nabu = WakeGate("okay nabu")
    assert nabu.classify("OK Nabu", 0.0) == WakeOnly()
    assert nabu.classify("Okay, Nabu. Set a timer for ten minutes.", 1.0) == Command("Set a timer for ten minutes.")
    assert nabu.classify("Okay, now set a timer", 2.0) == Ignore()


# --- a transcript's own spelling of a phrase the device heard (issue 28, item 1) ---------------------


@pytest.mark.parametrize(("transcript", "command"), [
    ("Hey Travis, what time is it?", "what time is it?"),
    ("Hey, head jarvis what time is it", "what time is it"),
    ("a jar vis list the files", "list the files"),
    ("Hey Jarvis, list the files.", "list the files."),
])  # fmt: skip
def test_a_phrase_the_device_heard_is_not_undone_by_the_transcripts_spelling(transcript, command):
    gate = WakeGate("hey jarvis")
    assert gate.classify(transcript, 0.0) == (Command(command) if transcript.startswith("Hey Jarvis") else Ignore())
    assert gate.classify(transcript, 0.0, woken=True) == Command(command)


@pytest.mark.parametrize("transcript", ["what time is it", "the weather is nice today", "I think we should go"])
def test_words_with_nothing_like_the_phrase_up_front_say_the_device_was_wrong(transcript):
    assert WakeGate("hey jarvis").classify(transcript, 0.0, woken=True) == Ignore()


def test_the_fallback_spotters_wake_is_not_trusted_over_the_words():
    # "computer" has no shipped model: pocketsphinx spots it, and takes "commuter" for it.
    assert WakeGate("computer").classify("commuter traffic was awful", 0.0, woken=True) == Ignore()
