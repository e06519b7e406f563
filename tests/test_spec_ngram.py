"""N-gram proposer: the incremental index agrees with a rescan, and a step costs microseconds."""

from __future__ import annotations

import random
import time

import pytest

from localllm.engine.speculative.ngram import NgramIndex


def rescan(tokens: list[int], n_min: int, n_max: int, k: int) -> list[int]:
    """Reference: the longest suffix seen earlier, its latest occurrence, continued by period."""
    L = len(tokens)
    for n in range(min(n_max, L - 1), n_min - 1, -1):
        suffix = tokens[L - n :]
        for j in range(L - 1, n - 1, -1):
            if tokens[j - n : j] == suffix:
                draft: list[int] = []
                for m in range(k):
                    draft.append(tokens[j + m] if j + m < L else draft[j + m - L])
                return draft
    return []


@pytest.mark.parametrize("vocab,n_min,n_max", [(3, 2, 4), (8, 1, 3), (50, 2, 2), (5, 3, 5)])
def test_incremental_index_matches_rescan(vocab: int, n_min: int, n_max: int) -> None:
    rng = random.Random(vocab * 100 + n_max)
    tokens: list[int] = []
    index = NgramIndex(n_min, n_max)
    for _ in range(400):
        tokens.append(rng.randrange(vocab))
        if rng.random() < 0.3:  # appended in bursts too, like accepted drafts
            tokens += tokens[-rng.randrange(1, 6) :]
        index.sync(tokens)
        k = rng.randrange(1, 9)
        assert index.propose(tokens, k) == rescan(tokens, n_min, n_max, k)


def test_longest_suffix_wins_and_latest_occurrence() -> None:
    t = [1, 2, 3, 9, 5, 2, 3, 7, 1, 2, 3]
    ix = NgramIndex(2, 4)
    ix.sync(t)
    assert ix.lookup(t) == (3, 3)  # "1 2 3" occurred at 0..2 (followed by 9); "2 3" later too
    assert ix.propose(t, 3) == [9, 5, 2]
    t2 = [4, 2, 3, 7, 6, 2, 3, 8, 2, 3]
    ix2 = NgramIndex(2, 4)
    ix2.sync(t2)
    assert ix2.propose(t2, 2) == [8, 2]  # latest of the two "2 3"


def test_repeated_line_is_continued_periodically() -> None:
    line = [10, 11, 12, 13]
    t = line * 2 + line[:2]
    ix = NgramIndex(2, 4)
    ix.sync(t)
    assert ix.propose(t, 8) == [12, 13, 10, 11, 12, 13, 10, 11]


def test_no_match_and_edge_cases() -> None:
    ix = NgramIndex(2, 4)
    assert ix.propose([], 4) == []
    ix.sync([5])
    assert ix.propose([5], 4) == []
    t = [1, 2, 3, 4]
    ix = NgramIndex(2, 4)
    ix.sync(t)
    assert ix.propose(t, 4) == [] and ix.propose(t, 0) == []
    with pytest.raises(ValueError, match="n_min"):
        NgramIndex(3, 2)


def test_large_token_ids_do_not_collide_across_lengths() -> None:
    big = 150_000
    t = [big, 7, big + 1, big, 7]
    ix = NgramIndex(1, 3)
    ix.sync(t)
    assert ix.propose(t, 2) == rescan(t, 1, 3, 2) == [big + 1, big]


def test_step_cost_is_independent_of_context_length() -> None:
    """32K tokens of context: append one token and propose in microseconds (loose bound)."""
    rng = random.Random(0)
    tokens = [rng.randrange(32000) for _ in range(32768)]
    index = NgramIndex(2, 4)
    index.sync(tokens)
    steps = 2000
    t0 = time.perf_counter()
    for i in range(steps):
        tokens.append(tokens[i * 7 % 30000])  # repeats earlier text: proposals hit
        index.sync(tokens)
        index.propose(tokens, 8)
    per_step = (time.perf_counter() - t0) / steps
    assert per_step < 300e-6, f"{per_step * 1e6:.0f} us per step"  # a rescan takes ~10 ms


def test_a_long_prompt_is_indexed_in_bounded_pieces() -> None:
    rng = random.Random(5)
    tokens = [rng.randrange(50) for _ in range(10_000)]
    index = NgramIndex(2, 4)
    steps = 0
    while not index.sync(tokens, budget=4096):
        steps += 1
    assert steps == 2 and len(index) == len(tokens)
    assert index.propose(tokens, 5) == rescan(tokens, 2, 4, 5)
