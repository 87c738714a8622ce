"""A small generated corpus (a dozen clips, about a second to make), shared by the detector tests."""

from __future__ import annotations

import pytest

from benchmarks.corpus import Clip, Corpus, standard


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def small_corpus(corpus) -> tuple[list[Clip], list[Clip]]:
    """(addressed, not addressed): six of each."""
    return standard(corpus, small=True)
