"""Ranking scored answers (FLIP's rewards, the bench's pointwise ratings): parsed first by score, unparsed last."""

from __future__ import annotations


def rank_by_score(scored: list[tuple[int, float | None]]) -> tuple[list[int], int | None, list[int]]:
    """(ranking, best_index, tied_best) from (index, score) pairs, score None for an unparsed answer.

    Parsed by score, highest first, ties in index order; unparsed after them in index order. `best_index` is the
    single parsed index with the top score; null when nothing parsed or the top is shared, and then `tied_best`
    lists the indices sharing it.
    """
    parsed = sorted(((index, score) for index, score in scored if score is not None), key=lambda p: (-p[1], p[0]))
    ranking = [index for index, _ in parsed] + sorted(index for index, score in scored if score is None)
    if not parsed:
        return ranking, None, []
    top = [index for index, score in parsed if score == parsed[0][1]]
    return (ranking, None, top) if len(top) > 1 else (ranking, top[0], [])
