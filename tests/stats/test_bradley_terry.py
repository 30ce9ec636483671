"""The ranking's Bradley-Terry strengths and bootstrap intervals against Arena-Hard-Auto's own computation
(testkit/arena_hard_reference.py: compute_mle_elo with scikit-learn, show_result.py's percentiles) on fixed verdicts."""

from __future__ import annotations

import random

import pytest

from judge_mcp.stats import bradley_terry, intervals

reference = pytest.importorskip("testkit.arena_hard_reference", reason="needs numpy and scikit-learn (the test extra)")


def _battles(seed: int = 7, n: int = 120) -> list[tuple[str, str, str]]:
    """Verdicts among four candidates of unequal strength, some inconsistent (ties)."""
    rng = random.Random(seed)
    strength = {"alpha": 1.2, "beta": 0.6, "gamma": 0.0, "delta": -0.4}
    names = list(strength)
    out = []
    for _ in range(n):
        a, b = rng.sample(names, 2)
        p = 1 / (1 + 10 ** (strength[b] - strength[a]))
        r = rng.random()
        out.append((a, b, "tie" if r < 0.2 else "A" if r < 0.2 + 0.8 * p else "B"))
    return out


def test_strengths_equal_arena_hard_autos_fit() -> None:
    battles = _battles()
    ours = bradley_terry.fit(battles)
    theirs = reference.compute_mle_elo(battles)
    assert ours is not None and set(ours) == set(theirs)
    for name in theirs:
        assert ours[name] == pytest.approx(theirs[name], abs=1e-3), name
    assert sum(ours.values()) / len(ours) == pytest.approx(1000.0)


def test_intervals_equal_arena_hard_autos_bootstrap_on_the_same_resamples() -> None:
    battles = _battles()
    rows = {row["name"]: row for row in bradley_terry.ranking(battles)}
    resamples = list(intervals.resamples(len(battles), bradley_terry.ROUNDS, intervals.SEED))
    theirs = reference.bootstrap_interval(battles, resamples)
    point = reference.compute_mle_elo(battles)
    for name, (low, high) in theirs.items():
        assert rows[name]["strength"] == pytest.approx(point[name], abs=0.01)
        assert rows[name]["ci"] == pytest.approx([low, high], abs=0.01), name
    assert [r["name"] for r in bradley_terry.ranking(battles)] == sorted(point, key=point.__getitem__, reverse=True)


def test_counts_and_consistency() -> None:
    battles = [("x", "y", "A"), ("x", "y", "tie"), ("y", "x", "A"), ("y", "x", "B")]
    rows = {row["name"]: row for row in bradley_terry.ranking(battles)}
    assert (rows["x"]["wins"], rows["x"]["losses"], rows["x"]["ties"], rows["x"]["battles"]) == (2, 1, 1, 4)
    assert (rows["y"]["wins"], rows["y"]["losses"], rows["y"]["ties"]) == (1, 2, 1)
    assert rows["x"]["consistent"] == 0.75
    # 1 win, 1 loss, 1 tie each way plus x's extra win: x ahead; four battles are too few for an interval
    assert rows["x"]["strength"] > rows["y"]["strength"]
    assert rows["x"]["ci"] == intervals.too_few(4)


def test_a_candidate_that_won_everything_has_no_finite_strength() -> None:
    battles = [("x", "y", "A")] * 12
    rows = bradley_terry.ranking(battles)
    assert all(row["strength"] is None and row["ci"] is None for row in rows)
