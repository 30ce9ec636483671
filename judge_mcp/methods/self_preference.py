"""The self-preference guard, as pure functions and one object per call.

LLM judges favour answers written by their own model family. `families` maps a model id to the families in
FAMILY_PATTERNS (an id may match several, e.g. a DeepSeek distill of Qwen); an unknown id has none and never warns.
A judge and an author share a family when their sets intersect. A caller names the answers' authors with
`response_models` (compare_pair, grade_score_options and their panels); `Guard` is what runtime/run.py consults:
before the judging, which judges may judge (`exclude_same_family` leaves same-family judges out), and after it, the
findings for judges whose model is known only from their answers (the sampling backend: the client's model).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from judge_mcp.contract.args import PanelArgs, ToolArgs
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.results import SelfPreference

# family -> alternatives, matched case-insensitively anywhere in the model id where no letter or digit precedes
# them ("openai/gpt-4o-mini", "claude-sonnet-4-5", "qwen2.5:7b-instruct", "meta-llama/Llama-3.1-8B",
# "/models/SmolLM2-135M.gguf"). Provider prefixes ("openai/", "anthropic/") are not families: a backend's kind says
# which API it speaks, not who trained the model ("openai/qwen2.5" is a Qwen served over an OpenAI-compatible API).
FAMILY_PATTERNS: dict[str, str] = {
    "openai": r"gpt|chatgpt|o[1-9](?![0-9])|davinci",
    "anthropic": r"claude",
    "google": r"gemini|gemma|palm",
    "llama": r"llama|codellama",
    "mistral": r"mistral|mixtral|ministral|codestral|magistral|pixtral|devstral",
    "qwen": r"qwen|qwq",
    "deepseek": r"deepseek",
    "phi": r"phi",
    "smollm": r"smollm",
    "cohere": r"command-r|aya",
    "xai": r"grok",
}


@cache
def _family_res() -> dict[str, re.Pattern[str]]:
    """The patterns compiled at the first call that names authors, not at the server's start (runtime/run.py imports
    this module)."""
    return {name: re.compile(rf"(?<![a-z0-9])(?:{pattern})", re.I) for name, pattern in FAMILY_PATTERNS.items()}


def families(model: str | None) -> frozenset[str]:
    """The model families `model` belongs to (empty when none is recognised)."""
    if not model:
        return frozenset()
    return frozenset(name for name, pattern in _family_res().items() if pattern.search(model))


def self_preference(judges: Sequence[tuple[str, str]], response_models: Sequence[str]) -> list[SelfPreference]:
    """For each judge (backend name, model id) sharing a family with any answer's author: which answers, which
    families. Judges of no recognised family, or sharing none, are left out."""
    author_families = [families(m) for m in response_models]
    out = []
    for backend, model in judges:
        own = families(model)
        answers = [i for i, fam in enumerate(author_families) if own & fam]
        if answers:
            shared = sorted(set().union(*(own & author_families[i] for i in answers)))
            out.append(SelfPreference(backend=backend, judge_model=model, families=shared, answers=answers))
    return out


def self_preference_warnings(found: Sequence[SelfPreference], response_models: Sequence[str], names: Sequence[str]) -> list[str]:
    """One readable warning per same-family judge. `names` names each answer (response_a, options[2], ...)."""
    out = []
    for p in found:
        written = ", ".join(f"{names[i]} (by {response_models[i]})" for i in p.answers)
        action = "; excluded from the panel (exclude_same_family)" if p.excluded else ""
        out.append(
            f"self-preference risk: judge '{p.backend}' ({p.judge_model}) is of the {'/'.join(p.families)} family, "
            f"like the author of {written}; judges tend to favour their own family's answers{action}"
        )
    return out


def exclude(found: list[SelfPreference], members: Sequence[str]) -> tuple[list[SelfPreference], list[str]]:
    """Mark every same-family judge excluded; (updated records, the members that remain). A named error when
    none remains."""
    out = [p.model_copy(update={"excluded": True}) for p in found]
    gone = {p.backend for p in out}
    remaining = [m for m in members if m not in gone]
    if not remaining:
        judges = ", ".join(f"'{p.backend}' ({p.judge_model}, {'/'.join(p.families)})" for p in out)
        raise InputError(
            f"exclude_same_family leaves no judge: every judge shares a model family with an answer's author ({judges}); "
            "add a judge of another family or set exclude_same_family to false"
        )
    return out, remaining


@dataclass(frozen=True)
class Authors:
    """The self-preference guard's input for one call: who wrote each answer, what to call each answer in a
    warning, and whether same-family judges are left out."""

    models: list[str]
    names: list[str]
    exclude: bool = False


def authors(args: ToolArgs) -> Authors | None:
    """The guard's input from a tool's arguments: None without `response_models` (or for a tool without a panel)."""
    if not isinstance(args, PanelArgs) or args.response_models is None:
        return None
    return Authors(list(args.response_models), args.answer_names(), args.exclude_same_family)


@dataclass
class Guard:
    """One call's guard. `judges` (before any judging) says which of the chosen judges judge, `reported` (after)
    takes the models the judges' answers named, and `findings` is what the result carries: (self_preference records,
    or None when the caller named no authors; warnings)."""

    authors: Authors | None
    found: list[SelfPreference] | None = None
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, args: ToolArgs) -> "Guard":
        return cls(authors(args))

    def judges(self, judges: Sequence[tuple[str, str]]) -> list[str]:
        """The backend names among `judges` (name, model id) that judge; an InputError when exclusion leaves none."""
        names = [name for name, _ in judges]
        if self.authors is None:
            return names
        found = self_preference(judges, self.authors.models)
        if self.authors.exclude and found:
            found, names = exclude(found, names)
        self.found, self.warnings = found, self_preference_warnings(found, self.authors.models, self.authors.names)
        return names

    def reported(self, judges: Sequence[tuple[str, str, str]], own_warning: Callable[[str, str], str | None], *, one_judge: bool) -> None:
        """After the judging, with (backend name, configured model, model its answers named) of each judge. Without
        authors, a judge adds its backend's own warning (`own_warning(name, model)`: the sampling backend's), a
        panel's only where the models differ. With authors, a judge whose model differs is checked again with the
        named one: one judge as before the judging (exclusion included), a panel's findings for those judges
        replaced."""
        late = [(name, model) for name, configured, model in judges if model != configured]
        if self.authors is None:
            warned = judges if one_judge else [j for j in judges if j[2] != j[1]]
            self.warnings = [*self.warnings, *(w for name, _, model in warned for w in [own_warning(name, model)] if w)]
        elif late and one_judge:
            self.judges(late)
        elif late:
            names = {name for name, _ in late}
            self.found = [*(p for p in self.found or [] if p.backend not in names), *self_preference(late, self.authors.models)]
            self.warnings = self_preference_warnings(self.found, self.authors.models, self.authors.names)

    def update(self) -> dict[str, Any]:
        """What a result model gains: its `self_preference` when the caller named authors."""
        return {} if self.found is None else {"self_preference": self.found}
