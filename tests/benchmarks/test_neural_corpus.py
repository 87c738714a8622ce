"""The neural-voice corpus's draws (`benchmarks.neural_corpus.NeuralCorpus`, issue 34): piper renders
the same bytes every time here, so another draw is asked for by number; a draw repeats, two differ."""

from __future__ import annotations

from benchmarks.corpus import Corpus
from benchmarks.neural_corpus import NeuralCorpus, NeuralSpec, Variant

SPEC = NeuralSpec(("hey jarvis, what time is it",), (), Variant.NOISE, True, take=1)


def corpus(root, draw: int) -> NeuralCorpus:
    return NeuralCorpus(root, Corpus(root), draw=draw)


def test_a_draw_renders_the_same_clip_again_in_a_fresh_cache_and_another_draw_another(tmp_path):
    first, again = corpus(tmp_path / "a", 3).clip(SPEC), corpus(tmp_path / "b", 3).clip(SPEC)
    other = corpus(tmp_path / "c", 4).clip(SPEC)
    assert first.pcm == again.pcm and first.name == again.name
    assert other.pcm != first.pcm and other.name != first.name
    assert corpus(tmp_path / "a", 0).clip(SPEC).pcm not in (first.pcm, other.pcm)


def test_each_draw_keeps_its_renderings_in_its_own_folder_and_draw_0_in_the_old_one(tmp_path):
    folders = {corpus(tmp_path, d).cache_dir for d in (0, 1, 2)}
    assert tmp_path / "neural" in folders and len(folders) == 3


def test_a_draw_moves_every_take_by_a_little_and_draw_0_not_at_all(tmp_path):
    takes = range(12)
    plain, one, two = (corpus(tmp_path, d) for d in (0, 1, 2))
    assert all(plain.drawn_scales(t) == plain.scales(t) for t in takes)
    for drawn in (one, two):
        for t in takes:
            moved = drawn.drawn_scales(t)
            assert moved != plain.scales(t)
            assert all(abs(moved[k] / v - 1) <= 0.15 for k, v in plain.scales(t).items())
    assert [one.drawn_scales(t) for t in takes] != [two.drawn_scales(t) for t in takes]
    assert [one.drawn_scales(t) for t in takes] == [corpus(tmp_path, 1).drawn_scales(t) for t in takes]
