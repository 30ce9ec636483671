"""The judge_stats report as terminal tables (`judge-mcp stats`)."""

from __future__ import annotations

from collections.abc import Mapping

from judge_mcp.contract.results import Ci, GroupStats, LabelLength, Mean, Rate, StatsReport, Window


def ci_text(ci: Ci, places: int = 2) -> str:
    """A 95% interval as ` [low, high]`, ` [n too small]` when the sample is too small, "" when there is none."""
    if isinstance(ci, list):
        return f" [{ci[0]:.{places}f}, {ci[1]:.{places}f}]"
    return " [n too small]" if isinstance(ci, str) and ci.startswith("too few") else (f" [{ci}]" if isinstance(ci, str) else "")


def _pct(rate: Rate) -> str:
    if rate.rate is None:
        return "-"
    return f"{rate.rate:.2f} ({rate.count}/{rate.of}){ci_text(rate.ci)}"


def _figure(value: float | None, ci: Ci) -> str:
    return "-" if value is None else f"{value:.2f}{ci_text(ci)}"


def _mean(mean: Mean, places: int) -> str:
    return "-" if mean.mean is None else f"{mean.mean:.{places}f}"


STATS_COLUMNS = (
    "backend", "model", "tool", "inputs", "verdicts", "first-shown", "unbiased", "inconsistent", "unparsed", "re-asked", "ties",
    "longer wins", "calls", "cached", "latency ms", "reasoning", "billed input",
)


def _stats_rows(window: Window) -> list[list[str]]:
    rows = []
    for g in window.groups:
        rows.append([
            g.backend, g.model, g.tool, g.inputs, str(g.verdicts),
            _pct(g.position_bias), "-" if g.position_bias.unbiased is None else f"{g.position_bias.unbiased:.2f}",
            _pct(g.order_inconsistency), _pct(g.parse_failures), _pct(g.reasks), _pct(g.ties), _pct(g.length_preference),
            _mean(g.calls, 2), _mean(g.cached_calls, 2), _mean(g.latency_ms, 0), _mean(g.reasoning_tokens, 0), _billed(g),
        ])
    return rows


def _billed(g: GroupStats) -> str:
    """Billed-equivalent input tokens per verdict and the (read, write) price ratios it assumed; `-` when unknown."""
    cache = g.prompt_cache
    if cache is None or cache.billed_input is None:
        return "-"
    return f"{cache.billed_input:.0f} (x{cache.read_price:g}/x{cache.write_price:g})"


def _table(rows: list[list[str]], columns: tuple[str, ...] = STATS_COLUMNS) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(columns)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


AGREEMENT_COLUMNS = ("backend", "model", "tool", "inputs", "labelled", "accuracy", "kappa", "ECE", "Brier", "length bias")


def _length(length: LabelLength | None) -> str:
    """`bias (verdicts' longer share - labels' longer share of n)`, `-` when undefined."""
    if length is None or length.bias is None or length.longer_picked.rate is None or length.longer_labels.rate is None:
        return "-"
    return (f"{length.bias:.2f} ({length.longer_picked.rate:.2f} - {length.longer_labels.rate:.2f} of {length.longer_picked.of})"
            f"{ci_text(length.ci)}")


def _agreement_table(window: Window) -> str | None:
    """The groups' agreement with human labels (record_label) as a table; None when nothing is labelled."""
    rows = []
    for g in window.groups:
        a = g.agreement
        if a.labelled:
            cal = a.calibration
            figures = (_figure(a.kappa, a.kappa_ci), _figure(cal.ece, cal.ci.get("ece")), _figure(cal.brier, cal.ci.get("brier")))
            rows.append([g.backend, g.model, g.tool, g.inputs, str(a.labelled), _pct(a.accuracy), *figures, _length(a.length)])
    return _table(rows, AGREEMENT_COLUMNS) if rows else None


RANKING_COLUMNS = ("rank", "candidate", "strength [95% interval]", "battles", "wins", "losses", "ties", "consistent")


def _ranking_table(report: StatsReport) -> str | None:
    """The named candidates' ranking as a table; None without one."""
    rows = [
        [str(k), r.name, "-" if r.strength is None else f"{r.strength:.0f}{ci_text(r.ci, 0)}", str(r.battles), str(r.wins), str(r.losses),
         str(r.ties), f"{r.consistent:.2f}"]
        for k, r in enumerate(report.ranking, 1)
    ]
    return _table(rows, RANKING_COLUMNS) if rows else None


def none_of_tenant(what: str, one: str, tenant: str, others: Mapping[str, int], *, empty: str) -> str:
    """What a reading command says when the database holds none of `tenant`'s `what` (e.g. "verdicts", one item:
    "verdict"): `empty` when no tenant has any, else whose they are (`others`: tenant -> count) and the option that
    reads them, so that a wrong or forgotten --tenant does not read as an empty database."""
    if not others:
        return empty
    held = ", ".join(f"{name!r} ({n} {one}{'s' if n != 1 else ''})" for name, n in sorted(others.items()))
    whose = "tenant" if len(others) == 1 else "tenants"
    return f"no {what} of tenant {tenant!r}; the database holds {what} of {whose} {held}: read them with --tenant {min(others)}"


def empty_log(tenant: str, others: Mapping[str, int]) -> str:
    """`judge-mcp stats` when the log holds no verdict of `tenant` (see none_of_tenant)."""
    return none_of_tenant("verdicts", "verdict", tenant, others, empty="no verdicts in the log yet")


def render_stats(report: StatsReport, *, tenant: str = "local", others: Mapping[str, int] | None = None) -> str:
    """The report as two readable tables (all time, last N); rates as `rate (count/of)`, `-` when undefined. An
    empty report says whose verdicts the log holds instead (`others`, see empty_log)."""
    if report.all_time.verdicts == 0:
        return empty_log(tenant, others or {})
    parts = []
    windows = (
        (f"all time: {report.all_time.verdicts} verdicts", report.all_time),
        (f"last {report.last_n}: {report.last.verdicts} verdicts", report.last),
    )
    for title, window in windows:
        skipped = f" ({window.skipped} unreadable rows skipped)" if window.skipped else ""
        parts.append(f"{title}{skipped}\n{_table(_stats_rows(window))}")
    labelled = _agreement_table(report.all_time)
    if labelled is not None:
        parts.append(f"agreement with human labels (record_label), all time\n{labelled}")
    ranking = _ranking_table(report)
    if ranking is not None:
        parts.append(f"ranking of the named candidates (compare_pair / lwe_judge `candidates`), all time\n{ranking}")
    parts.append(
        "inputs: what the callers brought besides the judged texts (text: nothing; criteria, reference, images,\n"
        "conversation, trajectory), one row each; first-shown: parsed trials naming the first-shown answer (a judge without position bias scores `unbiased`);\n"
        "inconsistent: both orders parsed and disagreeing; unparsed / re-asked: per answer; ties: no winner (pairs),\n"
        "tied top reward (FLIP) or tied mode (grade); longer wins: decided pairs won by the longer answer (0.5: no preference).\n"
        "[low, high]: the 95% interval (Wilson for rates, a seeded bootstrap for kappa, ECE, Brier, length bias, strengths);\n"
        "[n too small]: too few verdicts to say."
        + ("\nlength bias: of decided verdicts with an A/B label and answers of unequal length, the share naming the longer\n"
           "answer minus the share of labels naming it (0: as long-winded as the labels)." if labelled is not None else "")
        + ("\nstrength: Bradley-Terry rating on Arena-Hard-Auto's scale (mean 1000; +400 = 10x the odds of winning); ties: verdicts\n"
           "whose two orders disagreed; consistent: the share whose orders agreed." if ranking is not None else "")
    )
    return "\n\n".join(parts)
