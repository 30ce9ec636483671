"""What a backend learned from its server, kept as named state apart from its configuration.

A backend's configuration (kind, URL, model, `structured_output`, `reasoning_effort`, budgets) says what the user
asked for. What the server refused, or what the model's name tells before any call, is `Learned`, one per model
(`ServerQuirks.of(model)`): the next request is built from both, so what a judge sends never depends on anything
but these named fields. Each flag is set once, by the first refusal that names it (a 400 of the OpenAI or
Anthropic wire), and the call that met the refusal lists the parameter in its record's `dropped_parameters`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields


@dataclass
class Learned:
    """One model's quirks on one backend. All False: the request as the wire format documents it."""

    max_completion_tokens: bool = False  # refuses `max_tokens`: the output budget goes as `max_completion_tokens`
    no_temperature: bool = False  # refuses `temperature` (other than its default, 1): sent without it
    no_top_p: bool = False
    no_logprobs: bool = False
    no_length_caps: bool = False  # refuses `maxLength`/`minLength` in a JSON schema: schemas go without them
    no_structured_output: bool = False  # refuses a JSON schema: the methods use the papers' text grammars
    no_system_role: bool = False  # refuses a system message: its text opens the first user message
    no_cache_control: bool = False  # refuses Anthropic's `cache_control` blocks: the first message goes as plain text
    no_cache_key: bool = False  # refuses OpenAI's `prompt_cache_key`: sent without it
    # answers with hidden reasoning (its family, a refusal only reasoning models make, or reasoning seen in a reply):
    # the backend's reasoning budget (or DEFAULT_REASONING_BUDGET) is added to every output budget
    reasoning: bool = False

    def flags(self) -> list[str]:
        """The names of the flags set (for logs and tests)."""
        return [f.name for f in fields(self) if getattr(self, f.name)]


class ServerQuirks:
    """`Learned` per model, each made by `first(model)` (what the model's name says up front) when first asked."""

    def __init__(self, first: Callable[[str], Learned] = lambda model: Learned()):
        self._first = first
        self._by_model: dict[str, Learned] = {}

    def of(self, model: str) -> Learned:
        learned = self._by_model.get(model)
        if learned is None:
            learned = self._by_model[model] = self._first(model)
        return learned
