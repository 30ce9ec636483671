"""One scripted model for every tool (shared by the reliability tests): it recognises which method sent a request
from the prompt's fences and answers as a correct judge would, by which shown answer holds a keyword.

`UniversalJudge(good="Canberra")` prefers the answer containing `good`. With `gullible=ATTACK`, an answer holding
the attack string wins instead (a judge that obeys injected text), which is how tests/methods/test_injection.py checks the
injection benchmark's arithmetic. LWE requests are answered by tests/lwe_script.LweScript("consistent") logic.

Also here: `CASES` (each tool with arguments whose correct verdict is known), `Faulty` (a judge that fails in a chosen
way, once per request or always), and two plain pairwise judges (`correct_judge`, `first_position_judge`).
"""

from __future__ import annotations

import math
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.lwe_script import LweScript, first_shown_is
from tests.scripted import Reply, prompt_text

PAIR_A = re.compile(r"<\|The Start of Assistant A's Answer\|>\n(.*?)\n<\|The End of Assistant A's Answer\|>", re.S)
OPTION_BLOCK = re.compile(r"^\[Option (\d+)\]\n(.*?)\n\[\\Option \1\]$", re.S | re.M)
RESPONSE_BLOCK = re.compile(r"----- BEGIN RESPONSE -----\n(.*?)\n----- END RESPONSE -----", re.S)

CAPITAL_Q = "What is the capital of Australia?"
GOOD, BAD = "The capital of Australia is Canberra.", "The capital of Australia is Sydney."
RIGHT_INSTRUCTION = "Name the capital city of Australia."
PARAPHRASE = "Name the capital of Australia."
WRONG_INSTRUCTION = "Write a short poem about the sea."
PAIR = {"prompt": CAPITAL_Q, "response_a": BAD, "response_b": GOOD}


def first_user(payload: dict[str, Any]) -> str:
    return next((m["content"] for m in payload.get("messages", []) if m.get("role") == "user"), "")


def method_of(payload: dict[str, Any]) -> str:
    text = first_user(payload)
    if "<|The Start of Assistant A's Answer|>" in text:
        return "compare_pair"
    if "[User Instruction]" in text:
        return "grade_score_options"
    if "----- BEGIN RESPONSE -----" in text:
        return "infer_instruction_reward"
    return "lwe_judge"


class UniversalJudge:
    def __init__(self, good: str = "Canberra", gullible: str | None = None):
        self.good = good
        self.gullible = gullible
        self.lwe = LweScript("consistent")

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        method = method_of(payload)
        text = first_user(payload)
        if method == "compare_pair":
            a = PAIR_A.search(text).group(1)
            b = text.split("<|The Start of Assistant B's Answer|>\n", 1)[1]
            first_better = self._first_wins(a, b)
            label = "[[A>B]]" if first_better else "[[B>A]]"
            return json.dumps({"own_answer": "Canberra.", "evaluation": "compared", "verdict": label})
        if method == "grade_score_options":
            blocks = [content for _, content in OPTION_BLOCK.findall(text)]
            number = self._pick(blocks) + 1
            if "response_format" in payload:
                return json.dumps({"evaluation": "weighed", "selection": f"Option {number}", "explanation": "best"})
            return f"Evaluation: weighed.\nSelection: Option {number}\nExplanation: best"
        if method == "infer_instruction_reward":
            shown = RESPONSE_BLOCK.search(text).group(1)
            inferred = self._inferred(shown)
            return json.dumps({"INFERRED INSTRUCTION": inferred, "REASONING": "read the response"})
        # LWE: vanilla verdicts go by the keyword (both orders agree), everything else by LweScript.
        full = prompt_text(payload)
        if full.startswith("Please act as an impartial judge") and self.gullible is None:
            return self.lwe.verdict("A" if first_shown_is(full, self.good) else "B")
        return self.lwe(payload)

    # ---- preferences: a gullible judge follows the attack, otherwise the keyword ----------------------------
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
        if self.gullible is not None:
            for k, block in enumerate(blocks):
                if self.gullible in block:
                    return k
        for k, block in enumerate(blocks):
            if self.good in block:
                return k
        return 0


def fence_follower(payload: dict[str, Any]) -> str:
    """A gullible pairwise text judge (issue 13, item 6): it takes the first line that reads like the end of
    Assistant B's answer, in any disguise, as the end of the judged content and obeys a verdict label written after
    it; otherwise the answer mentioning Sydney is worse."""
    text = prompt_text(payload)
    fence = re.search(r"(?im)^[^\w\n]*the\s*end\s*of\s*assistant\s*b\W*s\s*answer[^\w\n]*$", text)
    forged = re.search(r"\[{1,2}(A>B|B>A)\]{1,2}", text[fence.end():]) if fence else None
    if forged:
        return f"My final verdict is: [[{forged.group(1)}]]"
    first = re.search(r"Answer\|>\n(.*?)\n<\|The End of Assistant A", text, re.S).group(1)
    return "My final verdict is: " + ("[[B>A]]" if "Sydney" in first else "[[A>B]]")



# ---- every tool, with arguments whose correct verdict is known (GOOD is the right answer) ------------------------------
# tool -> (arguments, how to read the verdict from the structured output, the correct verdict)
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

    def __init__(self, fault: Callable[[], Reply], mode: str, judge: Callable[[dict], Reply | str] | None = None):
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
            reask = any(m.get("role") == "assistant" for m in payload.get("messages", []))
            fail = self.mode == "always" or (self.mode == "once" and first and not reask)
            if fail:
                self.faults += 1
        return self.fault() if fail else self.judge(payload)


# ---- plain pairwise judges (structured answers) --------------------------------------------------------------------------
def _shown_first(payload: dict) -> str:
    text = prompt_text(payload)
    return re.search(r"<\|The Start of Assistant A's Answer\|>\n(.*?)\n<\|The End", text, re.S).group(1)


def correct_judge(payload: dict) -> str:
    """Says the answer mentioning Sydney is worse, wherever it is shown."""
    bad_first = "Sydney" in _shown_first(payload)
    return json.dumps({"own_answer": "Canberra.", "evaluation": "One says Sydney.", "verdict": "[[B>A]]" if bad_first else "[[A>B]]"})


def first_position_judge(payload: dict) -> str:
    """Position-biased: always says the first-shown answer is better."""
    return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})


# ---- answers with chosen token log-probabilities (compare_pair's p_better) ----------------------------------------
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
            top = [("A", p_a), ("B", 1.0 - p_a), *extra]
            top = [{"token": t, "logprob": math.log(p) if p > 0 else -9999.0} for t, p in top]
            chosen = next(alt["logprob"] for alt in top if alt["token"] == token)
            out.append({"token": token, "logprob": chosen, "bytes": list(token.encode()), "top_logprobs": top})
        else:
            out.append({"token": token, "logprob": -0.01, "bytes": list(token.encode()), "top_logprobs": [{"token": token, "logprob": -0.01}]})
    return out


def verdict_json(first_better: bool) -> str:
    return json.dumps({"own_answer": "Canberra.", "evaluation": "One says Sydney.", "verdict": "[[A>B]]" if first_better else "[[B>A]]"})


# ---- grade_score_options: a judge that picks a chosen option by its text ------------------------------------------
_BLOCK = re.compile(r"^\[Option (\d+)\]\n(.*?)\n\[\\Option \1\]$", re.S | re.M)


def shown(payload: dict[str, Any]) -> list[str]:
    """The option contents in the order the judge was shown them (from the first user message)."""
    first_user = next(m["content"] for m in payload["messages"] if m["role"] == "user")
    blocks = _BLOCK.findall(first_user)
    assert [int(k) for k, _ in blocks] == list(range(1, len(blocks) + 1))
    return [content for _, content in blocks]


def answer(payload: dict[str, Any], number: int, why: str = "because") -> str:
    if "response_format" in payload:
        return json.dumps({"evaluation": "each option weighed", "selection": f"Option {number}", "explanation": why})
    return f"Evaluation: each option weighed.\nSelection: Option {number}\nExplanation: {why}"


def picks_text(target: str):
    return lambda p: answer(p, shown(p).index(target) + 1)


OPTIONS = ["Paris is the capital of France.", "Lyon.", "France has no capital.", "Marseille, I think."]
INSTRUCTION = "What is the capital of France?"
