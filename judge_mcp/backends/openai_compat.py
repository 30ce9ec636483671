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
"""

from __future__ import annotations

import copy
import logging
from typing import Any
from urllib.parse import urlsplit

from judge_mcp.backends.base import ChatRequest, Completion, prompt_cache_key
from judge_mcp.backends.errors import FatalError
from judge_mcp.backends.client import RETRYABLE_STATUS, HTTPBackend, classify_status, post_json
from judge_mcp.backends.openai_wire import chat_messages, logprob_params, parse_chat_completion
from judge_mcp.config.settings import STRUCTURED_OUTPUT_MODES

__all__ = ["OpenAICompatBackend", "parse_chat_completion", "RETRYABLE_STATUS", "classify_status", "post_json"]


log = logging.getLogger(__name__)

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


class OpenAICompatBackend(HTTPBackend):
    kind = "openai"
    supports_json_schema = True
    default_base_url = "https://api.openai.com/v1"

    def __init__(self, name: str, model: str, *, structured_output: str = "auto", **kwargs: Any):
        super().__init__(name, model, **kwargs)
        if structured_output not in STRUCTURED_OUTPUT_MODES:
            raise ValueError(f"backend '{name}': structured_output must be one of {', '.join(STRUCTURED_OUTPUT_MODES)}, got {structured_output!r}")
        self.structured_output = structured_output
        # instance-level: a refusal (auto) or the setting (off) turns it off, and methods use their text grammars
        self.supports_json_schema = structured_output != "off"
        # whether schemas keep their maxLength caps (a server refusing them turns this off, see _send)
        self.send_length_caps = (urlsplit(self.base_url).hostname or "") not in NO_LENGTH_CAPS_HOSTS
        self.supports_logprobs = True  # until the server refuses them (see _send)
        self.send_cache_key = True  # prompt_cache_key, until the server refuses it (see _send)

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.top_p is not None:
            payload["top_p"] = request.top_p
        if request.logit_bias:
            payload["logit_bias"] = {str(token): bias for token, bias in request.logit_bias}
        if request.json_schema is not None and self.supports_json_schema:
            schema = request.json_schema if self.send_length_caps else without_length_caps(request.json_schema)
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": schema, "strict": True},
            }
        if self.supports_logprobs:
            payload.update(logprob_params(request))
        if self.send_cache_key:
            payload["prompt_cache_key"] = prompt_cache_key(request)
        return payload

    async def _send(self, request: ChatRequest) -> Completion:
        payload = self.payload(request)
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        dropped: list[str] = []
        while True:  # each refused parameter is dropped once, so this sends at most five times
            try:
                body = await self.post(f"{self.base_url}/chat/completions", payload, headers)
                break
            except FatalError as exc:
                if self._refuses_length_caps(exc, payload) and "maxLength" not in dropped:
                    self.send_length_caps = False
                    dropped.append("maxLength")
                elif self._refuses_logprobs(exc, payload) and "logprobs" not in dropped:
                    self.supports_logprobs = False
                    dropped.append("logprobs")
                elif exc.status in (400, 422) and "prompt_cache_key" in payload and "prompt_cache_key" in exc.cause.lower():
                    self.send_cache_key = False
                    dropped.append("prompt_cache_key")
                elif self._refuses_structured_output(exc, payload) and "response_format" not in dropped:
                    self._stop_structured_output(exc)
                    dropped.append("response_format")
                else:
                    raise
                payload = self.payload(request)
        completion = parse_chat_completion(body, self.model, payload, structured="response_format" in payload)
        if dropped:
            completion.raw["dropped_parameters"] = dropped
        return completion

    def _refuses_structured_output(self, exc: FatalError, payload: dict[str, Any]) -> bool:
        """A 400/422 naming structured output for a payload that asked for it, when the setting allows a fallback."""
        if self.structured_output != "auto" or exc.status not in (400, 422) or "response_format" not in payload:
            return False
        cause = exc.cause.lower()
        return any(word in cause for word in STRUCTURED_OUTPUT_WORDS)

    def _stop_structured_output(self, exc: FatalError) -> None:
        """From now on no schema is sent; the first call to see the refusal says so in the log, once."""
        if self.supports_json_schema:
            self.supports_json_schema = False
            log.warning(
                "backend '%s' (%s) refused structured output (%s); it gets the papers' text grammars from now on "
                "(set structured_output = \"off\" for it to skip this first attempt)",
                self.name, self.describe(), exc.cause[:200],
            )

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
