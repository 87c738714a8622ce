"""The wake table's arithmetic: recall per family, pooled, and by how the command follows the phrase."""

from __future__ import annotations

from benchmarks.wake_choice import PAUSED, POOLED, RUN_ON, Peaks, at_cutoff, form_table


class FakeEngine:
    name, phrase = "fake", "hey jarvis"

    def cutoff_label(self, cutoff: float) -> str:
        return f"{cutoff:g}"


def peaks() -> Peaks:
    return Peaks(
        addressed=[("20 dB", "flite", RUN_ON, 0.99), ("20 dB", "flite", PAUSED, 0.2), ("20 dB", "festival", RUN_ON, 0.6),
                   ("clean", "flite", RUN_ON, 0.99)],
        ordinary=[("flite", 0.1)], near=[("festival", 0.95), ("flite", 0.3)],
        babble_wakes={0.5: 0}, babble_s=60.0, cpu_s=1.0, audio_s=100.0, babble_cpu_s=0.1,
    )


def test_recall_is_counted_per_family_pooled_and_per_form_at_the_cutoff():
    r = at_cutoff(peaks(), 0.5)
    assert (r.recall[("20 dB", "flite")].hits, r.recall[("20 dB", "flite")].total) == (1, 2)
    assert (r.recall[("20 dB", POOLED)].hits, r.recall[("20 dB", POOLED)].total) == (2, 3)
    assert (r.recall[("20 dB", RUN_ON)].hits, r.recall[("20 dB", RUN_ON)].total) == (2, 2)
    assert (r.recall[("20 dB", PAUSED)].hits, r.recall[("20 dB", PAUSED)].total) == (0, 1)
    assert (r.near[POOLED].hits, r.near[POOLED].total) == (1, 2)


def test_the_form_table_has_a_row_for_each_way_the_command_follows_the_phrase():
    lines = form_table([(FakeEngine(), 0.5, peaks())])
    [run_on] = [line for line in lines if RUN_ON in line]
    [paused] = [line for line in lines if PAUSED in line]
    assert "| 100 (1/1) | 100 (2/2) | - |" in run_on  # clean, 20 dB, 10 dB (none at 10 dB)
    assert "| - | 0 (0/1) | - |" in paused


def test_each_rule_is_judged_through_the_filter_its_settings_build():
    from benchmarks.wake_choice import BOTH_RULE, STRICT_RULE, UNVERIFIED_RULE, VERIFIER_RULE, judges_for
    from detectors.wake_verify import WakeVerifier

    judges = judges_for("hey jarvis", ["shipped", STRICT_RULE, VERIFIER_RULE, BOTH_RULE, UNVERIFIED_RULE])
    built = {rule: (judge.spotter.settings.confirm, judge.spotter.verifier) for rule, judge in judges.items()}
    # The shipped settings verify since session 24; WAKE_STRICT alone is the shipped settings with it.
    assert isinstance(built["shipped"][1], WakeVerifier) and built["shipped"][0].frames == 1
    assert built[STRICT_RULE][0].frames == 2 and isinstance(built[STRICT_RULE][1], WakeVerifier)
    assert built[UNVERIFIED_RULE][1] is None and built[UNVERIFIED_RULE][0].frames == 1 and not built[UNVERIFIED_RULE][0].verify
    assert built[VERIFIER_RULE][0].frames == 1 and isinstance(built[VERIFIER_RULE][1], WakeVerifier)
    assert built[BOTH_RULE][0].frames == 2 and isinstance(built[BOTH_RULE][1], WakeVerifier)


def test_a_rule_with_other_weights_and_a_verified_micro_cutoff_is_built_as_given(tmp_path):
    import numpy as np

    from benchmarks.wake_choice import Rule, judges_for
    from detectors.wake_verify import Weights

    weights = Weights(np.zeros(1536), np.ones(1536), np.zeros(1536), 0.0, 0.25)
    weights.save(tmp_path / "other.npz")
    rule = Rule("other", verify=True, weights=str(tmp_path / "other.npz"), micro_cutoff=0.2)
    [(label, judge)] = judges_for("hey jarvis", [rule]).items()
    assert label == "other" and judge.spotter.verifier.weights.threshold == 0.25
    assert judge.spotter._fusion.settings.verified_micro_cutoff == 0.2 and judge.spotter._fusion.settings.verify


def test_a_rule_with_first_stage_changes_builds_its_vad_and_fusion_with_them():
    import pytest

    from benchmarks.wake_choice import Rule, first_stage_changes, judges_for

    vad, confirm = first_stage_changes("vad.quiet_threshold=0.7, confirm.candidate_cutoff=0.05, vad.prefilter_mode=none")
    assert vad == (("quiet_threshold", 0.7), ("prefilter_mode", None)) and confirm == (("candidate_cutoff", 0.05),)
    judges = judges_for("hey jarvis", ["shipped", Rule("changed", vad=vad, confirm=confirm)])
    shipped, changed = judges["shipped"], judges["changed"]
    assert changed.upload.detectors.vad.settings.quiet_threshold == 0.7
    assert changed.upload.detectors.vad.settings.prefilter_mode is None
    assert changed.spotter._fusion.settings.candidate_cutoff == 0.05 and changed.spotter.cutoff == 0.05
    from detectors.vad import VadSettings

    assert shipped.upload.detectors.vad.settings == VadSettings() and VadSettings().quiet_threshold != 0.7
    assert shipped.spotter._fusion.settings.candidate_cutoff == 0.1
    with pytest.raises(ValueError):
        first_stage_changes("vad.no_such_field=1")


def test_first_stage_changes_are_measured_on_the_shipped_rule_only_where_they_change_it(monkeypatch):
    import benchmarks.wake_choice as wake_choice

    measured = []
    monkeypatch.setattr(wake_choice, "neural_table", lambda phrase, per, cache, rules, *a, **k: measured.extend(
        r if isinstance(r, str) else r.label for r in rules) or [])
    wake_choice.main(["--neural", "12", "--phrases", "hey jarvis", "--verifier", "w.npz", "--first-stage", "vad.quiet_threshold=0.6",
                      "--first-stage", "vad.quiet_threshold=0.6,confirm.reask_cutoff=0.97", "--first-stage", "confirm.reask_cutoff=0.97"])
    # The shipped rule verifies since session 24, so a verifier's field (reask_cutoff) changes it too.
    assert measured == ["shipped", "WAKE_VERIFY=true (w)", "shipped + vad.quiet_threshold=0.6",
                        "WAKE_VERIFY=true (w) + vad.quiet_threshold=0.6",
                        "shipped + vad.quiet_threshold=0.6,confirm.reask_cutoff=0.97",
                        "WAKE_VERIFY=true (w) + vad.quiet_threshold=0.6,confirm.reask_cutoff=0.97",
                        "shipped + confirm.reask_cutoff=0.97", "WAKE_VERIFY=true (w) + confirm.reask_cutoff=0.97"]
