"""A scripted LWE model for tests: it recognises each LWE request (vanilla, case prompt, case verdict, feedback,
refine, condense) and answers according to a chosen behaviour. Shared by tests/methods/test_lwe.py, tests/storage/test_lwe_crash.py
and bench/perf.py. To act while a refine call is in flight, wrap the script in tests/helpers.Hold with
`when=lambda p: role_of(p) == "refine"`."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

from tests.scripted import Reply, prompt_text

REFINED_MARK = "REFINED-META-PROMPT"


def role_of(payload: dict[str, Any]) -> str:
    """Which LWE step sent this request."""
    schema = ((payload.get("response_format") or {}).get("json_schema") or {}).get("name")
    text = prompt_text(payload)
    messages = payload.get("messages", [])
    reask = len(messages) > 1 and messages[-1].get("role") == "user" and any(m.get("role") == "assistant" for m in messages)
    if text.startswith("Optimize your current meta prompt"):
        return "refine"
    if text.startswith("You are a helpful assistant that summarizes and shortens text"):
        return "condense"
    if schema == "lwe_feedback" or text.startswith("You will be given:"):
        return "feedback"
    if schema == "lwe_vanilla_verdict" or text.startswith("Please act as an impartial judge"):
        return "vanilla"
    if schema == "lwe_case_verdict" or "[[[CASE PROMPT]]]" in text:
        return "judge"
    return "reask" if reask else "build"


def first_shown_is(text: str, marker: str) -> bool:
    """Whether the answer containing `marker` is the one shown as Assistant A."""
    a = text.split("[The Start of Assistant A's Answer]", 1)[-1].split("[The End of Assistant A's Answer]", 1)[0]
    return marker in a


class LweScript:
    """behaviour: "first" (position-biased: the first-shown answer always wins), "consistent" (the answer holding
    GOOD wins in either order), "garbage" (case verdicts unreadable; vanilla stays position-biased),
    "vanilla_garbage" (vanilla verdicts unreadable; the rest position-biased).

    `structured` answers as JSON (the OpenAI-compatible backend asks for a schema); else the paper's text grammar.
    `refine_text(n, meta)` writes the n-th refinement's meta-prompt.
    """

    def __init__(self, behaviour: str = "first", *, structured: bool = True, refine_text=None, feedback_reply=None):
        self.behaviour = behaviour
        self.structured = structured
        self.refine_text = refine_text or (lambda n, meta: f"{REFINED_MARK} {n}\nGenerate an evaluation prompt for the example. Require the final judgment as '[[A]]' or '[[B]]'.")
        self.feedback_reply = feedback_reply  # feedback_reply(n) -> Reply | str overrides the feedback answers
        self.roles: Counter[str] = Counter()
        self._lock = threading.Lock()

    def verdict(self, side: str) -> str:
        if self.structured:
            return json.dumps({"explanation": f"Assistant {side} is better.", "verdict": side})
        return f"Assistant {side} is better.\n\n[[{side}]]"

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        role = role_of(payload)
        text = prompt_text(payload)
        with self._lock:
            self.roles[role] += 1
            n = self.roles[role]
        if role in ("vanilla", "judge"):
            if role == "judge" and self.behaviour == "garbage":
                return "I cannot decide between them."
            if role == "vanilla" and self.behaviour == "vanilla_garbage":
                return "Both are fine."
            if self.behaviour == "consistent":
                return self.verdict("A" if first_shown_is(text, "GOOD") else "B")
            return self.verdict("A")
        if role == "build":
            return "[[[CASE PROMPT]]]\nCheck each answer against the question. Finish with '[[A]]' or '[[B]]'."
        if role == "feedback" and self.feedback_reply is not None:
            return self.feedback_reply(n)
        if role == "feedback":
            answer = {"score": 3, "label": "Not sure", "learned tips": f"tip {n}: compare both answers to the question", "reasoning": "position may have mattered"}
            return json.dumps(answer) if self.structured else "Here: " + json.dumps(answer)
        if role == "refine":
            meta = text.split("[[[The Start of Current Meta Prompt]]]", 1)[1].split("[[[The End of Current Meta Prompt]]]", 1)[0]
            return self.refine_text(n, meta.strip())
        if role == "condense":
            meta = text.split("[[[The Start of Current Meta Prompt]]]", 1)[1].split("[[[The End of Current Meta Prompt]]]", 1)[0]
            return "CONDENSED " + meta.strip()[: len(meta) // 2]
        return "I cannot decide."  # a re-ask after garbage
