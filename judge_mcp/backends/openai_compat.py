"""OpenAI-compatible chat completions over aiohttp: OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio.

The wire format lives here; the endpoint (base URL, key, HTTP client) is configuration. Structured output is
requested as `response_format: {"type": "json_schema", ...}`, which OpenAI, vLLM, llama.cpp's server, Ollama and
LM Studio all accept.

Length caps: a method's schema declares `maxLength` on its free-text fields (methods/ask.bounded) so a looping
model must close the JSON. llama.cpp's server, vLLM and LM Studio turn the schema into a grammar and honour it;
OpenAI's hosted strict mode does not list `maxLength` among its supported keywords, so for api.openai.com the caps
are left out of the schema sent. Any other server that refuses the schema with a 400 naming `maxLength`/`minLength`
gets the same schema without caps once more, and no caps from then on (`dropped_parameters` in the call record).

Log-probabilities (`logprobs`, `top_logprobs`) are sent when a request asks for them; a server that refuses them
with a 400 naming `logprobs` (some reasoning models) gets the request again without them, once, and none from then
on: the completion then carries no log-probabilities (`logprobs` None), never a failed judgment.

Prompt caching: every request carries `prompt_cache_key` (base.prompt_cache_key: a hash of the prompt's start, so
a judgment's calls and a growing conversation's judgments route to the same cache on OpenAI). vLLM, Ollama and
llama.cpp's server ignore fields they do not know; a server that refuses it (a 400 or 422 naming it) gets the
request again without it, and none from then on.

Structured output itself: a server that refuses `response_format` (a 400 or 422 naming `response_format`,
`json_schema` or structured output; servers that take only `{"type": "json_object"}` answer so too) gets that call
once more without it, and from then on `supports_json_schema` is false for this backend, so the methods use the
papers' text grammars; one warning goes to the log. The setting `structured_output` (`auto`, the default; `off`:
never send a schema; `json_schema`: always send it, a refusal is an error) overrides the detection.

Reasoning models (backends/reasoning.py): OpenAI's reasoning families are sent `max_completion_tokens` and none of
temperature, top_p and logprobs from their first call (known by name); any other model that refuses `max_tokens`
(then it reasons: it gets the default reasoning budget), `temperature` or `top_p` with a 400 naming it is sent the
request without it, and one that refuses the system role gets the system text inside its first user message
(JudgeBench's markers). Each refusal is learned once per backend and model (`learned.Learned`: the calls in flight
when it came may meet it too, none sent after) and listed in that call's `dropped_parameters`. `reasoning_effort` is sent
when set; the output limit is the method's budget plus the reasoning budget (remote.RemoteBackend.output_budget).
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

from judge_mcp.backends.base import ChatRequest, Completion, prompt_cache_key
from judge_mcp.backends.errors import FatalError
from judge_mcp.backends.client import RETRYABLE_STATUS, classify_status, post_json
from judge_mcp.backends.learned import Learned
from judge_mcp.backends.openai_wire import chat_messages, logprob_params, parse_chat_completion, system_in_user
from judge_mcp.backends.reasoning import openai_known
from judge_mcp.backends.remote import RemoteBackend, refused

__all__ = ["OpenAICompatBackend", "parse_chat_completion", "RETRYABLE_STATUS", "classify_status", "post_json"]


LENGTH_KEYWORDS = ("maxLength", "minLength")
# words in a refusal's cause that name structured output (checked lower-cased)
STRUCTURED_OUTPUT_WORDS = ("response_format", "json_schema", "json schema", "structured output", "guided_json")
NO_LENGTH_CAPS_HOSTS = ("api.openai.com",)  # strict structured outputs there refuse maxLength


def without_length_caps(schema: Any) -> Any:
    """A copy of `schema` without `maxLength`/`minLength` anywhere (property names are kept)."""
    if isinstance(schema, list):
        return [without_length_caps(item) for item in schema]
    if not isinstance(schema, dict):
        return copy.deepcopy(schema)
    out = {}
    for key, value in schema.items():
        if key in LENGTH_KEYWORDS and isinstance(value, int):
            continue
        if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: without_length_caps(sub) for name, sub in value.items()}
        else:
            out[key] = without_length_caps(value)
    return out


class OpenAICompatBackend(RemoteBackend):
    kind = "openai"
    default_base_url = "https://api.openai.com/v1"

    def known_up_front(self, model: str) -> Learned:
        """Strict structured outputs at api.openai.com refuse `maxLength`; OpenAI's reasoning families refuse
        `max_tokens` and (most of them) the sampling parameters (backends/reasoning.openai_known)."""
        learned = Learned(no_length_caps=(urlsplit(self.base_url).hostname or "") in NO_LENGTH_CAPS_HOSTS)
        known = openai_known(model, self.reasoning_effort)
        if known is not None and known.reasoning:
            learned.max_completion_tokens = learned.reasoning = True
            learned.no_temperature = learned.no_top_p = learned.no_logprobs = not known.samples
        return learned

    @property  # type: ignore[override]
    def supports_logprobs(self) -> bool:
        return not self.learned.no_logprobs

    @supports_logprobs.setter
    def supports_logprobs(self, value: bool) -> None:
        self.learned.no_logprobs = not value

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        learned = self.learned
        messages = chat_messages(request)
        if learned.no_system_role:
            messages = system_in_user(messages)
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        if not request.server_defaults:
            payload["max_completion_tokens" if learned.max_completion_tokens else "max_tokens"] = self.output_budget(request)
            if not learned.no_temperature:
                payload["temperature"] = request.temperature
            if request.top_p is not None and not learned.no_top_p:
                payload["top_p"] = request.top_p
        if self.reasoning_effort is not None:
            payload["reasoning_effort"] = self.reasoning_effort
        if request.logit_bias:
            payload["logit_bias"] = {str(token): bias for token, bias in request.logit_bias}
        if request.json_schema is not None and self.supports_json_schema:
            schema = without_length_caps(request.json_schema) if learned.no_length_caps else request.json_schema
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": schema, "strict": True},
            }
        if self.supports_logprobs:
            payload.update(logprob_params(request))
        if request.cache_hints and not self.learned.no_cache_key:
            payload["prompt_cache_key"] = prompt_cache_key(request)
        return payload

    async def _send(self, request: ChatRequest) -> Completion:
        payload = self.payload(request)
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        dropped: list[str] = []
        while True:  # each refused parameter is dropped once (learned for the model), so this ends
            try:
                body = await self.post(f"{self.base_url}/chat/completions", payload, headers)
                break
            except FatalError as exc:
                refusal = self._refusal(exc, payload, dropped)
                if refusal is None:
                    raise
                dropped.append(refusal)
                payload = self.payload(request)
        completion = parse_chat_completion(body, self.model, payload, structured="response_format" in payload)
        return self.finish(completion, request, payload, dropped, "it takes only its default")

    def _refusal(self, exc: FatalError, payload: dict[str, Any], dropped: list[str]) -> str | None:
        """The parameter a 400/422 refuses, learned for this model (None: not a refusal this backend can work around)."""
        learned = self.learned
        if refused(exc, payload, "max_tokens") and "max_tokens" not in dropped:
            learned.max_completion_tokens = learned.reasoning = True  # only reasoning models refuse it
            return "max_tokens"
        for name, flag in (("temperature", "no_temperature"), ("top_p", "no_top_p")):
            if refused(exc, payload, name) and name not in dropped:
                setattr(learned, flag, True)
                return name
        if self._refuses_system_role(exc, payload) and "system" not in dropped:
            learned.no_system_role = True
            return "system"
        if self._refuses_length_caps(exc, payload) and "maxLength" not in dropped:
            learned.no_length_caps = True
            return "maxLength"
        if self._refuses_logprobs(exc, payload) and "logprobs" not in dropped:
            learned.no_logprobs = True
            return "logprobs"
        if exc.status in (400, 422) and "prompt_cache_key" in payload and "prompt_cache_key" in exc.cause.lower():
            learned.no_cache_key = True  # a server that takes no cache routing key
            return "prompt_cache_key"
        if "response_format" not in dropped and self.refuses_structured_output(
            exc, "response_format" in payload, STRUCTURED_OUTPUT_WORDS, (400, 422)
        ):
            return "response_format"
        return None

    @staticmethod
    def _refuses_system_role(exc: FatalError, payload: dict[str, Any]) -> bool:
        """A 400 refusing the system role (o1-mini, o1-preview) for a payload that has a system message."""
        cause = exc.cause.lower()
        has_system = any(m.get("role") == "system" for m in payload["messages"])
        return exc.status == 400 and has_system and "'system'" in cause and "role" in cause

    @staticmethod
    def _refuses_logprobs(exc: FatalError, payload: dict[str, Any]) -> bool:
        """A 400 naming logprobs for a payload that asked for them."""
        return exc.status == 400 and "logprobs" in payload and "logprob" in exc.cause.lower()

    @staticmethod
    def _refuses_length_caps(exc: FatalError, payload: dict[str, Any]) -> bool:
        """A 400 naming maxLength/minLength for a payload whose schema carries them."""
        if exc.status != 400 or "response_format" not in payload:
            return False
        schema = payload["response_format"]["json_schema"]["schema"]
        if without_length_caps(schema) == schema:
            return False
        cause = exc.cause.lower()
        return any(k.lower() in cause for k in LENGTH_KEYWORDS)

