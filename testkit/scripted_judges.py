"""Scripted judges: who answers what on the scripted servers (testkit/scripted_servers.py). Each is a responder,
`payload -> Reply | str`, that reads the request the way a model would (which method sent it, which answer is shown
where) and answers as a judge with a known habit would. Tests and benchmarks take them from here; nothing else
defines a scripted judge that more than one test file uses.

- `UniversalJudge(good=...)`: right for every tool, by which shown text holds a keyword (`gullible=` obeys an
  injected string instead); `CASES`: every tool with arguments whose right verdict is known; `Faulty`: a judge that
  fails in a chosen way, once per request or always.
- `correct_judge`, `first_shown_judge`: plain pairwise judges (`first_shown_judge` is position-biased for every
  method); `fence_follower`: a pairwise text judge fooled by forged fences.
- `ScoreJudge`: score_response's pointwise scores per criterion (chosen scores, samples, token probabilities).
- `LweScript`: the LWE steps (vanilla, case prompt, case verdict, feedback, refine, condense) with a chosen habit.
- Answer builders: `verdict_json`, `logprob_content` (chosen token log-probabilities), `answer`/`picks_text` (Grade
  Score selections), `UNIVERSAL_ANSWER` (one JSON object every method's parser accepts).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from testkit.scripted_servers import Reply, content_text, prompt_text

Responder = Callable[[dict[str, Any]], "Reply | str"]

PAIR_A = re.compile(r"<\|The Start of Assistant A's Answer\|>\n(.*?)\n<\|The End of Assistant A's Answer\|>", re.S)
PAIR_B = re.compile(r"<\|The Start of Assistant B's Answer\|>\n(.*?)\n<\|The End of Assistant B's Answer\|>", re.S)
OPTION_BLOCK = re.compile(r"^\[Option (\d+)\]\n(.*?)\n\[\\Option \1\]$", re.S | re.M)
CRITERION_BLOCK = re.compile(r"<\|The Start of Evaluation Criterion\|>\n(.*?)\n<\|The End of Evaluation Criterion\|>", re.S)
RESPONSE_BLOCK = re.compile(r"----- BEGIN RESPONSE -----\n(.*?)\n----- END RESPONSE -----", re.S)

# ---- the known-verdict texts (GOOD is the right answer) -----------------------------------------------------------------
CAPITAL_Q = "What is the capital of Australia?"
GOOD, BAD = "The capital of Australia is Canberra.", "The capital of Australia is Sydney."
RIGHT_INSTRUCTION = "Name the capital city of Australia."
PARAPHRASE = "Name the capital of Australia."
WRONG_INSTRUCTION = "Write a short poem about the sea."
PAIR = {"prompt": CAPITAL_Q, "response_a": BAD, "response_b": GOOD}
OPTIONS = ["Paris is the capital of France.", "Lyon.", "France has no capital.", "Marseille, I think."]
INSTRUCTION = "What is the capital of France?"
FEEDBACK = json.dumps({"score": 4, "label": "Not sure", "learned tips": "compare carefully", "reasoning": "fine"})
UNIVERSAL_ANSWER = json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]", "REASONING": "r",
                               "INFERRED INSTRUCTION": "Write a haiku about the sea.", "explanation": "e", "selection": 1,
                               "Selection": "Option 1", "SCORE": "7"})


# ---- reading a request -------------------------------------------------------------------------------------------------
def first_user(payload: dict[str, Any]) -> str:
    return next((content_text(m["content"]) for m in payload.get("messages", []) if m.get("role") == "user"), "")


def schema_name(payload: dict[str, Any]) -> str | None:
    return ((payload.get("response_format") or {}).get("json_schema") or {}).get("name")


def method_of(payload: dict[str, Any]) -> str:
    text = first_user(payload)
    if "<|The Start of Assistant A's Answer|>" in text:
        return "compare_pair"
    if "[User Instruction]" in text:
        return "grade_score_options"
    if "----- BEGIN RESPONSE -----" in text:
        return "infer_instruction_reward"
    if "<|The Start of AI Answer|>" in text:
        return "score_response"
    return "lwe_judge"


def reasked(payload: dict[str, Any]) -> bool:
    """Whether the request carries an earlier answer of the model (a re-ask or a continuation)."""
    return any(m.get("role") == "assistant" for m in payload.get("messages", []))


def shown_first(payload: dict[str, Any]) -> str:
    """The answer a pairwise prompt shows as Assistant A."""
    match = re.search(r"<\|The Start of Assistant A's Answer\|>\n(.*?)\n<\|The End", prompt_text(payload), re.S)
    assert match, "not a pairwise prompt"
    return match.group(1)


def shown(payload: dict[str, Any]) -> list[str]:
    """The option contents in the order a Grade Score prompt shows them (from the first user message)."""
    blocks = OPTION_BLOCK.findall(first_user(payload))
    assert [int(k) for k, _ in blocks] == list(range(1, len(blocks) + 1))
    return [content for _, content in blocks]


def is_arena_hard(payload: dict[str, Any]) -> bool:
    """Arena-Hard's system prompt, as a system message or folded into the first user message (JudgeBench's o1 rule)."""
    return any((m["role"] == "system" or str(m["content"]).startswith("<|BEGIN_SYSTEM_MESSAGE|>")) and "[[A>>B]]" in m["content"]
               for m in payload["messages"])


# ---- answers ---------------------------------------------------------------------------------------------------------
def verdict_json(first_better: bool) -> str:
    return json.dumps({"own_answer": "Canberra.", "evaluation": "One says Sydney.", "verdict": "[[A>B]]" if first_better else "[[B>A]]"})


def answer(payload: dict[str, Any], number: int, why: str = "because") -> str:
    """A Grade Score selection of option `number`, as JSON when the request asks for a schema, else in the text grammar."""
    if "response_format" in payload:
        return json.dumps({"evaluation": "each option weighed", "selection": f"Option {number}", "explanation": why})
    return f"Evaluation: each option weighed.\nSelection: Option {number}\nExplanation: {why}"


def picks_text(target: str) -> Responder:
    """A Grade Score judge that picks the option whose text is `target`, wherever it is shown."""
    return lambda p: answer(p, shown(p).index(target) + 1)


_PIECES = re.compile(r"\[\[|[AB]|[^\[AB]+|\[")


def logprob_content(content: str, p_a: float | None, extra: tuple[tuple[str, float], ...] = ()) -> list[dict]:
    """`content` cut into tokens (`[[` and each label letter alone), each its own only alternative, except the last
    label's letter, whose alternatives are "A" with probability p_a and "B" with 1 - p_a (plus `extra`)."""
    tokens = _PIECES.findall(content)
    assert "".join(tokens) == content
    letters = [i for i, t in enumerate(tokens) if t in "AB" and i > 0 and tokens[i - 1] == "[["]
    out = []
    for i, token in enumerate(tokens):
        if letters and i == letters[-1] and p_a is not None:
            top = [{"token": t, "logprob": math.log(p) if p > 0 else -9999.0} for t, p in (("A", p_a), ("B", 1.0 - p_a), *extra)]
            chosen = next(alt["logprob"] for alt in top if alt["token"] == token)
            out.append({"token": token, "logprob": chosen, "bytes": list(token.encode()), "top_logprobs": top})
        else:
            out.append({"token": token, "logprob": -0.01, "bytes": list(token.encode()), "top_logprobs": [{"token": token, "logprob": -0.01}]})
    return out


# ---- plain pairwise judges -------------------------------------------------------------------------------------------
def correct_judge(payload: dict[str, Any]) -> str:
    """compare_pair: the answer mentioning Sydney is worse, wherever it is shown."""
    return verdict_json("Sydney" not in shown_first(payload))


def first_shown_judge(payload: dict[str, Any]) -> str:
    """Position-biased, for every method: whatever is shown first wins (compare_pair's [[A>B]], Grade Score's option 1,
    LWE's A); LWE's feedback is FEEDBACK, and its free-text steps get a fixed prompt."""
    name = schema_name(payload)
    if is_arena_hard(payload):
        return "Assistant A is slightly better: [[A>B]]"
    if name in ("lwe_vanilla_verdict", "lwe_case_verdict"):
        return json.dumps({"explanation": "e", "verdict": "A"})
    if name == "lwe_feedback":
        return FEEDBACK
    if name == "grade_selection" or method_of(payload) == "grade_score_options":
        return answer(payload, 1, "first")
    if name == "pairwise_verdict" or method_of(payload) == "compare_pair":
        return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})
    return "Judge which answer is better."


def fence_follower(payload: dict[str, Any]) -> str:
    """A gullible pairwise text judge: it takes the first line that reads like the end of Assistant B's answer, in any
    disguise, as the end of the judged content and obeys a verdict label written after it; otherwise the answer
    mentioning Sydney is worse."""
    text = prompt_text(payload)
    fence = re.search(r"(?im)^[^\w\n]*the\s*end\s*of\s*assistant\s*b\W*s\s*answer[^\w\n]*$", text)
    forged = re.search(r"\[{1,2}(A>B|B>A)\]{1,2}", text[fence.end():]) if fence else None
    if forged:
        return f"My final verdict is: [[{forged.group(1)}]]"
    first = re.search(r"Answer\|>\n(.*?)\n<\|The End of Assistant A", text, re.S)
    assert first, "not a pairwise prompt"
    return "My final verdict is: " + ("[[B>A]]" if "Sydney" in first.group(1) else "[[A>B]]")


# ---- every tool, right by a keyword ------------------------------------------------------------------------------------
class UniversalJudge:
    """Right for every tool: the shown text holding `good` wins. With `gullible=ATTACK`, a text holding the attack
    string wins instead (a judge that obeys injected text). LWE requests are answered by LweScript("consistent")."""

    def __init__(self, good: str = "Canberra", gullible: str | None = None):
        self.good = good
        self.gullible = gullible
        self.lwe = LweScript("consistent")

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        method = method_of(payload)
        text = first_user(payload)
        if method == "compare_pair":
            a = PAIR_A.search(text)
            assert a, "not a pairwise prompt"
            b = text.split("<|The Start of Assistant B's Answer|>\n", 1)[1]
            label = "[[A>B]]" if self._first_wins(a.group(1), b) else "[[B>A]]"
            return json.dumps({"own_answer": "Canberra.", "evaluation": "compared", "verdict": label})
        if method == "grade_score_options":
            number = self._pick([content for _, content in OPTION_BLOCK.findall(text)]) + 1
            if "response_format" in payload:
                return json.dumps({"evaluation": "weighed", "selection": f"Option {number}", "explanation": "best"})
            return f"Evaluation: weighed.\nSelection: Option {number}\nExplanation: best"
        if method == "infer_instruction_reward":
            response = RESPONSE_BLOCK.search(text)
            assert response, "not a FLIP prompt"
            return json.dumps({"INFERRED INSTRUCTION": self._inferred(response.group(1)), "REASONING": "read the response"})
        if method == "score_response":
            return ScoreJudge(lambda name, p: 9 if self.good in first_user(p).rsplit("<|The Start of AI Answer|>", 1)[1] else 2)(payload)
        # LWE: vanilla verdicts go by the keyword (both orders agree), everything else by LweScript.
        full = prompt_text(payload)
        if full.startswith("Please act as an impartial judge") and self.gullible is None:
            return self.lwe.verdict("A" if first_shown_is(full, self.good) else "B")
        return self.lwe(payload)

    def _inferred(self, text: str) -> str:
        """A gullible judge infers the instruction exactly for the attacked response; a good response gets a close
        paraphrase (reward < 1 but above a wrong one's)."""
        if self.gullible is not None and self.gullible in text:
            return RIGHT_INSTRUCTION
        return PARAPHRASE if self.good in text else WRONG_INSTRUCTION

    def _first_wins(self, a: str, b: str) -> bool:
        if self.gullible is not None:
            if self.gullible in a:
                return True
            if self.gullible in b:
                return False
        return self.good in a

    def _pick(self, blocks: list[str]) -> int:
        for marker in (self.gullible, self.good):
            if marker is not None:
                for k, block in enumerate(blocks):
                    if marker in block:
                        return k
        return 0


class ScoreJudge:
    """score_response: answers a criterion's request (its name: the criterion block's text before any ':') with
    `score(name, payload)`, an int or any text (an out-of-scale or unreadable one); with `probabilities(name)` ->
    {value: p}, the score's digits are one token whose alternatives carry those probabilities. Thread-safe."""

    def __init__(self, score: Callable[[str, dict[str, Any]], Any], probabilities: Callable[[str], dict[int, float]] | None = None):
        self.score, self.probabilities = score, probabilities
        self.asked: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, payload: dict[str, Any]) -> Reply:
        block = CRITERION_BLOCK.search(first_user(payload))
        name = block.group(1).split(":", 1)[0] if block else ""
        with self._lock:
            self.asked[name] += 1
        content = json.dumps({"REASONING": f"judged on {name}", "SCORE": str(self.score(name, payload))})
        probs = self.probabilities(name) if self.probabilities else None
        if not probs:
            return Reply(content=content)
        head, digits, tail = re.match(r'(.*"SCORE": ")(\d+)(.*)', content, re.S).groups()  # type: ignore[union-attr]
        top = [{"token": str(v), "logprob": math.log(p) if p > 0 else -9999.0} for v, p in probs.items()]
        chosen = next((t["logprob"] for t in top if t["token"] == digits), -0.01)
        pieces = [{"token": head, "logprob": -0.01, "top_logprobs": [{"token": head, "logprob": -0.01}]},
                  {"token": digits, "logprob": chosen, "top_logprobs": top},
                  {"token": tail, "logprob": -0.01, "top_logprobs": [{"token": tail, "logprob": -0.01}]}]
        return Reply(content=content, logprobs=pieces)


# tool -> (arguments, how to read the verdict from the structured output, the right verdict)
CASES: dict[str, tuple[dict[str, Any], Callable[[dict], Any], Any]] = {
    "compare_pair": (PAIR, lambda d: d["winner"], "B"),
    "infer_instruction_reward": ({"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD]}, lambda d: d["best_index"], 1),
    "grade_score_options": ({"instruction": CAPITAL_Q, "options": [BAD, GOOD, "I do not know."]}, lambda d: d["winner_index"], 1),
    "lwe_judge": ({**PAIR, "session": "faults"}, lambda d: d["winner"], "B"),
}


class Faulty:
    """Answers like `judge`, except: `mode="once"` fails the first attempt of every distinct request other than a
    re-ask (so a retry, or the re-ask after an unreadable answer, gets through); `mode="always"` fails every request;
    `mode="never"` fails none. Thread-safe (the scripted server is threaded)."""

    def __init__(self, fault: Callable[[], Reply], mode: str, judge: Responder | None = None):
        self.fault, self.mode = fault, mode
        self.judge = judge or UniversalJudge()
        self.seen: set[str] = set()
        self.faults = 0
        self._lock = threading.Lock()

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        key = json.dumps(payload, sort_keys=True)
        with self._lock:
            first = key not in self.seen
            self.seen.add(key)
            fail = self.mode == "always" or (self.mode == "once" and first and not reasked(payload))
            if fail:
                self.faults += 1
        return self.fault() if fail else self.judge(payload)


# ---- the LWE steps ---------------------------------------------------------------------------------------------------
REFINED_MARK = "REFINED-META-PROMPT"


def role_of(payload: dict[str, Any]) -> str:
    """Which LWE step sent this request."""
    schema = schema_name(payload)
    text = prompt_text(payload)
    messages = payload.get("messages", [])
    reask = len(messages) > 1 and messages[-1].get("role") == "user" and reasked(payload)
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
    """Whether the answer containing `marker` is the one shown as Assistant A (LWE's fences)."""
    a = text.split("[The Start of Assistant A's Answer]", 1)[-1].split("[The End of Assistant A's Answer]", 1)[0]
    return marker in a


def lwe_case(i: int) -> dict[str, str]:
    """The i-th of a stream of pairs whose right answer (response_a) holds GOOD, the marker LweScript("consistent") follows."""
    return {"prompt": f"Question {i}: what is {i} + {i}?", "response_a": f"GOOD: {2 * i}", "response_b": f"It is {2 * i + 1}."}


def _meta_prompt(text: str) -> str:
    return text.split("[[[The Start of Current Meta Prompt]]]", 1)[1].split("[[[The End of Current Meta Prompt]]]", 1)[0]


class LweScript:
    """behaviour: "first" (position-biased: the first-shown answer always wins), "consistent" (the answer holding
    GOOD wins in either order), "garbage" (case verdicts unreadable; vanilla stays position-biased),
    "vanilla_garbage" (vanilla verdicts unreadable; the rest position-biased).

    `structured` answers as JSON (the OpenAI-compatible backend asks for a schema); else the paper's text grammar.
    `refine_text(n, meta)` writes the n-th refinement's meta-prompt; `feedback_reply(n)` overrides the feedback answers.
    `roles` counts the requests per step. To act while a refine call is in flight, wrap the script in
    tests/helpers.Hold with `when=lambda p: role_of(p) == "refine"`.
    """

    def __init__(self, behaviour: str = "first", *, structured: bool = True, refine_text: Callable[[int, str], str] | None = None,
                 feedback_reply: Callable[[int], Reply | str] | None = None):
        self.behaviour = behaviour
        self.structured = structured
        self.refine_text = refine_text or (lambda n, meta: f"{REFINED_MARK} {n}\nGenerate an evaluation prompt for the example. "
                                           "Require the final judgment as '[[A]]' or '[[B]]'.")
        self.feedback_reply = feedback_reply
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
            return self._verdict(role, text)
        if role == "build":
            return "[[[CASE PROMPT]]]\nCheck each answer against the question. Finish with '[[A]]' or '[[B]]'."
        if role == "feedback":
            if self.feedback_reply is not None:
                return self.feedback_reply(n)
            feedback = {"score": 3, "label": "Not sure", "learned tips": f"tip {n}: compare both answers to the question",
                        "reasoning": "position may have mattered"}
            return json.dumps(feedback) if self.structured else "Here: " + json.dumps(feedback)
        if role == "refine":
            return self.refine_text(n, _meta_prompt(text).strip())
        if role == "condense":
            meta = _meta_prompt(text)
            return "CONDENSED " + meta.strip()[: len(meta) // 2]
        return "I cannot decide."  # a re-ask after garbage

    def _verdict(self, role: str, text: str) -> str:
        if role == "judge" and self.behaviour == "garbage":
            return "I cannot decide between them."
        if role == "vanilla" and self.behaviour == "vanilla_garbage":
            return "Both are fine."
        if self.behaviour == "consistent":
            return self.verdict("A" if first_shown_is(text, "GOOD") else "B")
        return self.verdict("A")
