"""Live bias telemetry: figures an agent (or its operator) reads before trusting a judge, per (backend, model, tool,
inputs brought: text, criteria, reference, images), over all time and over the last N verdicts.

The figures are kept current as verdicts are written: the verdict log computes each verdict's facts once, from the
objects the tool produced (storage/verdict_facts.py), and adds them to per-group counters and a compact per-verdict
facts table in the transaction that writes the verdict row (storage/verdict_stats.py). `from_store` reads the
counters for all time (a few rows however long the log) and sums the newest N facts rows for the last-N window
(about N narrow rows, by index); neither reads the verdict log itself. "All time" means every verdict the log still
holds: retention (`judge-mcp gc`, JUDGE_MCP_VERDICTS_MAX_AGE_DAYS) takes deleted verdicts off the counters in the
transaction that deletes them. Databases logged before the counters existed are backfilled once by a migration.
`scan_store` computes the same report by reading every row of the log (the reference the tests and
perf/stats_scale.py compare with). What each figure counts, per tool:

- position_bias: of parsed pairwise trials, the share naming the answer shown first as better (compare_pair's
  trials, lwe_judge's two vanilla verdicts and its meta-path judgment, which is shown in the caller's order);
  for grade_score_options, the share of parsed trials picking the first shown position. `unbiased` is what an
  unbiased judge scores: 0.5 for pairs, the mean of 1/n over the counted grade_score_options trials.
- order_inconsistency: compare_pair and lwe_judge (vanilla) verdicts with both orders parsed whose two orders
  disagree.
- parse_failures / reasks: per answer (a compare_pair or grade_score_options trial, a FLIP response, an LWE
  vanilla verdict or meta-path judgment): answers left unparsed / answers that needed the re-ask.
- ties: compare_pair and lwe_judge: verdicts with no winner (orders disagree or an answer unparsed);
  infer_instruction_reward: the top reward tied (of verdicts with a parsed response); grade_score_options: the
  mode tied (of verdicts with a parsed trial).
- length_preference: of decided compare_pair / lwe_judge verdicts whose two answers differ in length
  (characters), the share won by the longer answer (0.5: no preference); against the caller's labels, the same
  share beside the labels' share of longer answers and their difference (`agreement.length`, agreement.py).
- calls, cached_calls, latency_ms: means of the verdicts' usage; reasoning_tokens: the mean hidden reasoning of the
  verdicts whose backend reported it (`of` counts those; verdicts logged before it was counted are backfilled).
- prompt_cache: prompt tokens, those read from and written to the provider's prompt cache (means over the verdicts
  that reported each), and the billed-equivalent input per verdict with the price ratios it assumed: Anthropic's
  0.1x reads and 1.25x writes (model ids `anthropic/...`), else JUDGE_MCP_CACHED_INPUT_PRICE for reads.

Every rate carries its numerator and denominator and `ci`, its 95% Wilson interval (stats/intervals.py; a text
under intervals.MIN_N verdicts); a rate with denominator 0 is null, never 0.
`ranking` (all time, the tenant's): the candidates named by compare_pair / lwe_judge `candidates`, ranked by
Bradley-Terry strength from their both-order verdicts (stats/bradley_terry.py, storage/battles.py).
A panel row (an output with a `panel` list) counts under the backend and model it was logged with; a member that
carries its own `trials` also counts as a verdict of that member's backend and model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from judge_mcp.calls.usage import billed_input, cache_prices
from judge_mcp.stats import agreement, bradley_terry, intervals
from judge_mcp.contract.fields import DEFAULT_LAST, MAX_LAST
from judge_mcp.contract.results import GroupStats, PromptCacheStats, RankedCandidate, StatsReport, Window
from judge_mcp.storage import battles as battle_log
from judge_mcp.storage import verdict_stats
from judge_mcp.storage.verdict_facts import ANSWERS, PAIR_TOOLS, Counts, Key, contributions, row_from_json
from judge_mcp.storage.verdict_log import VerdictLog
from judge_mcp.storage.verdict_stats import WindowCounts

if TYPE_CHECKING:
    from judge_mcp.storage.engine import Engine

__all__ = ["DEFAULT_LAST", "MAX_LAST", "check_last", "compute", "from_store", "iter_rows", "scan_store", "summary"]

PAGE = 500
DEFAULT_CACHED_PRICE = 0.5  # Settings.cached_input_price's default


def _rate(count: int, of: int) -> dict[str, Any]:
    return {"rate": round(count / of, 4) if of else None, "count": count, "of": of, "ci": intervals.ci_rate(count, of)}


def prompt_cache(model: str, c: Counts, cached_price: float) -> PromptCacheStats | None:
    """The group's prompt tokens and billed-equivalent input per verdict; None when no verdict reported them."""
    if not c.prompt_tokens_n:
        return None
    read, write = cache_prices(model, cached_price)
    cached, written = c.cached_prompt_tokens_sum, c.cache_write_tokens_sum
    billed = billed_input(c.prompt_tokens_sum, cached, written, (read, write))
    return PromptCacheStats(
        prompt_tokens={"mean": round(c.prompt_tokens_sum / c.prompt_tokens_n, 1), "of": c.prompt_tokens_n},
        cached_prompt_tokens={"mean": round(cached / c.cached_prompt_tokens_n, 1) if c.cached_prompt_tokens_n else None, "of": c.cached_prompt_tokens_n},
        cache_write_tokens={"mean": round(written / c.cache_write_tokens_n, 1) if c.cache_write_tokens_n else None, "of": c.cache_write_tokens_n},
        billed_input=round(billed / c.prompt_tokens_n, 1), read_price=read, write_price=write,
    )


def summary(key: Key, c: Counts, cached_price: float = DEFAULT_CACHED_PRICE) -> GroupStats:
    """One group's figures from its counts."""
    def mean(total: float, n: int, places: int) -> dict[str, Any]:
        return {"mean": round(total / n, places) if n else None, "of": n}

    backend, model, tool, inputs = key
    return GroupStats(
        backend=backend,
        model=model,
        tool=tool,
        inputs=inputs,
        verdicts=c.verdicts,
        position_bias={**_rate(c.first, c.picks), "unbiased": round(c.unbiased_sum / c.picks, 4) if c.picks else None},
        order_inconsistency=_rate(c.disagree, c.both_orders),
        parse_failures=_rate(c.unparsed, c.answers),
        reasks=_rate(c.reasked, c.reask_known),
        ties=_rate(c.ties, c.tie_of),
        length_preference=_rate(c.longer, c.decided),
        calls=mean(c.calls_sum, c.calls_n, 2),
        cached_calls=mean(c.cached_calls_sum, c.cached_calls_n, 2),
        latency_ms=mean(c.latency_ms_sum, c.latency_ms_n, 1),
        prompt_cache=prompt_cache(model, c, cached_price),
        reasoning_tokens=mean(c.reasoning_tokens_sum, c.reasoning_tokens_n, 1),
    )


def window(counts: WindowCounts, cached_price: float = DEFAULT_CACHED_PRICE) -> Window:
    return Window(
        verdicts=counts.verdicts,
        oldest_at=counts.oldest_at,
        newest_at=counts.newest_at,
        skipped=counts.skipped,
        groups=[summary(key, c, cached_price) for key, c in sorted(counts.groups.items())],
    )


def check_last(value: Any, name: str = "last") -> int:
    """The last-N window size (an int, or a string of digits), or a ValueError naming the argument `name`."""
    number = value
    if isinstance(value, str):
        try:
            number = int(value.strip(), 10)
        except ValueError:
            raise ValueError(f"'{name}' must be a whole number from 1 to {MAX_LAST:,}, got {value!r}") from None
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_LAST:
        raise ValueError(f"'{name}' must be a whole number from 1 to {MAX_LAST:,}, got {value!r}")
    return number


def from_store(store: "Engine", last: int = DEFAULT_LAST, cached_price: float = DEFAULT_CACHED_PRICE) -> StatsReport:
    """The report from the store's counters (all time) and its newest `last` facts rows, with each group's agreement
    with human labels (agreement.py); `cached_price` is JUDGE_MCP_CACHED_INPUT_PRICE. Blocking: from async code run
    it in a worker thread."""
    last = check_last(last)
    everything = verdict_stats.all_time(store)
    recent = verdict_stats.last(store, last) if everything.verdicts > last else None
    report = StatsReport(last_n=last, all_time=window(everything, cached_price), last=window(recent or everything, cached_price))
    return ranked(agreement.attach(report, store), store)


_RANKINGS: dict[tuple[int, int, int], list[RankedCandidate]] = {}  # (newest battle's id, battles, their hash) -> ranking
_KEPT_RANKINGS = 64


def ranked(report: StatsReport, store: "Engine") -> StatsReport:
    """The report with the tenant's ranking of named candidates (empty when no verdict names its candidates). The
    bootstrap refits 100 resamples, so a ranking is kept in memory by the battles it was computed from (it is a pure
    function of them), and recomputed once they change (a new one, or retention deleting some)."""
    battles, newest = battle_log.battles(store)
    if not battles or newest is None:
        return report
    key = (newest, len(battles), hash(tuple(battles)))  # the battles themselves: the same ones give the same ranking
    rows = _RANKINGS.get(key)
    if rows is None:
        rows = [RankedCandidate(**row) for row in bradley_terry.ranking(battles)]
        if len(_RANKINGS) >= _KEPT_RANKINGS:
            _RANKINGS.pop(next(iter(_RANKINGS)))
        _RANKINGS[key] = rows
    return report.model_copy(update={"ranking": rows})


# ---- the reference: the same report from every row of the log ----------------------------------------------------
class _Scan:
    def __init__(self) -> None:
        self.counts = WindowCounts()

    def add(self, row: dict[str, Any]) -> None:
        counts = self.counts
        counts.verdicts += 1
        at = row.get("created_at")
        if isinstance(at, (int, float)):
            counts.oldest_at = at if counts.oldest_at is None else min(counts.oldest_at, at)
            counts.newest_at = at if counts.newest_at is None else max(counts.newest_at, at)
        parts = contributions(row)
        if parts is None:
            counts.skipped += 1
            return
        for key, part in parts:
            counts.groups[key] = verdict_stats.plus(counts.groups.get(key, Counts()), part)


def compute(rows_newest_first: Iterable[dict[str, Any]], last: int = DEFAULT_LAST) -> StatsReport:
    """The report from decoded verdict-log rows, newest first (`row_from_json` of `VerdictLog.stats_page` rows)."""
    last = check_last(last)
    everything, recent = _Scan(), _Scan()
    for k, row in enumerate(rows_newest_first):
        everything.add(row)
        if k < last:
            recent.add(row)
    return StatsReport(last_n=last, all_time=window(everything.counts), last=window(recent.counts))


def iter_rows(store: "Engine", page: int = PAGE) -> Iterator[dict[str, Any]]:
    """Every verdict-log row, newest first, read `page` rows at a time (one short read per page, no lock held
    between pages: rows logged meanwhile are newer than the first page and are not included)."""
    before: int | None = None
    while True:
        rows = VerdictLog(store).stats_page(before_id=before, limit=page, pair_tools=PAIR_TOOLS, answers=ANSWERS)
        yield from (row_from_json(row) for row in rows)
        if len(rows) < page:
            return
        before = rows[-1]["id"]


def scan_store(store: "Engine", last: int = DEFAULT_LAST) -> StatsReport:
    """The report computed by reading every row of the verdict log (what `from_store` did before the counters): the
    reference the counters are compared with), with the labels' agreement as `from_store` has it. Blocking."""
    return ranked(agreement.attach(compute(iter_rows(store), last), store), store)
