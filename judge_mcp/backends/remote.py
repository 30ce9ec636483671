"""What the two HTTP wire formats (OpenAI-compatible, Anthropic) share above the transport: the structured-output
setting and its fallback, what the backend learned from its server (`learned.ServerQuirks`, one `Learned` per
model), the reasoning budget added to every answer budget, and the warnings a dropped sampling parameter earns.
"""

from __future__ import annotations

import logging
from typing import Any


from judge_mcp.backends.base import ChatRequest, Completion
from judge_mcp.backends.client import HTTPBackend
from judge_mcp.backends.errors import FatalError
from judge_mcp.backends.learned import Learned, ServerQuirks
from judge_mcp.backends.reasoning import DEFAULT_REASONING_BUDGET
from judge_mcp.config.values import ConfigError, non_negative_int, reasoning_effort as check_effort, structured_output_mode

log = logging.getLogger(__name__)

# words of a refusal that say a parameter is not taken (checked lower-cased, with the parameter's name)
REFUSAL_WORDS = ("unsupported", "not support", "only the default", "not allowed", "not permitted")


class RemoteBackend(HTTPBackend):
    """An HTTP backend with a wire format: `payload(request)` and `_send` are the subclass's."""

    def __init__(
        self, name: str, model: str, *, structured_output: str = "auto", reasoning_effort: str | None = None,
        reasoning_budget_tokens: int | None = None, **kwargs: Any,
    ):
        super().__init__(name, model, **kwargs)
        try:
            self.structured_output = structured_output_mode(structured_output, f"backend '{name}': structured_output")
            self.reasoning_effort = check_effort(reasoning_effort, f"backend '{name}': reasoning_effort")
            self.reasoning_budget_tokens = None if reasoning_budget_tokens is None else non_negative_int(
                reasoning_budget_tokens, f"backend '{name}': reasoning_budget_tokens")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        self.quirks = ServerQuirks(self.known_up_front)

    def known_up_front(self, model: str) -> Learned:
        """What a model's name says before its first call (the OpenAI-compatible backend knows OpenAI's reasoning families)."""
        return Learned()

    @property
    def learned(self) -> Learned:
        """What this backend learned about its model so far."""
        return self.quirks.of(self.model)

    # ---- structured output: the setting, then what the server said -----------------------------------------------
    @property  # type: ignore[override]
    def supports_json_schema(self) -> bool:
        return self.structured_output != "off" and not self.learned.no_structured_output

    @supports_json_schema.setter
    def supports_json_schema(self, value: bool) -> None:
        self.learned.no_structured_output = not value

    def refuses_structured_output(self, exc: FatalError, sent: bool, words: tuple[str, ...], statuses: tuple[int, ...] = (400,)) -> bool:
        """A refusal naming structured output (`words`) for a request that carried it, where the setting allows the
        fallback (`auto`): from now on no schema is sent, and the first call to see the refusal logs one warning."""
        if self.structured_output != "auto" or exc.status not in statuses or not sent:
            return False
        cause = exc.cause.lower()
        if not any(word in cause for word in words):
            return False
        if not self.learned.no_structured_output:
            log.warning(
                "backend '%s' (%s) refused structured output (%s); it gets the papers' text grammars from now on "
                "(set structured_output = \"off\" for it to skip this first attempt)",
                self.name, self.describe(), exc.cause[:200],
            )
        self.learned.no_structured_output = True
        return True

    # ---- reasoning ---------------------------------------------------------------------------------------------
    @property
    def reasoning_budget(self) -> int:
        """The setting's budget, else DEFAULT_REASONING_BUDGET for a model known or learned to reason, else 0."""
        if self.reasoning_budget_tokens is not None:
            return self.reasoning_budget_tokens
        return DEFAULT_REASONING_BUDGET if self.learned.reasoning else 0

    def output_budget(self, request: ChatRequest) -> int:
        """The output limit sent: the method's answer budget plus the reasoning budget (reasoning spends from the same
        limit, so the answer keeps its own)."""
        return request.max_tokens + self.reasoning_budget

    def sampling_notes(self, request: ChatRequest, payload: dict[str, Any], why: str) -> list[str]:
        """Warnings for the sampling parameters a request asked for that the payload goes without."""
        notes = []
        if not request.server_defaults and "temperature" not in payload and request.temperature != 1.0:
            notes.append(f"{self.model_id} cannot honour temperature {request.temperature:g} ({why}): it samples at its "
                         "default, so the same request may be judged differently on another run")
        if request.top_p is not None and not request.server_defaults and "top_p" not in payload:
            notes.append(f"{self.model_id} was sent without top_p {request.top_p:g} ({why})")
        return notes

    def finish(self, completion: Completion, request: ChatRequest, payload: dict[str, Any], dropped: list[str], why: str) -> Completion:
        """The parsed completion with its record of dropped parameters and its notes; reasoning seen in a reply marks
        the model as reasoning (its later calls get the default reasoning budget unless one is set)."""
        if dropped:
            completion.raw["dropped_parameters"] = dropped
        completion.notes.extend(self.sampling_notes(request, payload, why))
        if completion.reasoning_chars or completion.usage.reasoning_tokens:
            self.learned.reasoning = True
        return completion


def refused(exc: FatalError, payload: dict[str, Any], name: str) -> bool:
    """A 400 that refuses the parameter `name` the payload carried (its name and a word of refusal in the cause)."""
    if exc.status != 400 or name not in payload:
        return False
    cause = exc.cause.lower()
    return name in cause and any(word in cause for word in REFUSAL_WORDS)

