"""Expected values for tests/bench/test_alpaca_eval.py from AlpacaEval's own code (not a dependency of judge-mcp).

    python3 -m venv /tmp/ae_ref && /tmp/ae_ref/bin/pip install alpaca-eval==0.6.6 scikit-learn patsy
    /tmp/ae_ref/bin/python tools/alpaca_eval_reference.py tests/bench_fixtures/alpaca_h2h.jsonl

Runs AlpacaEval's annotator (`weighted_alpaca_eval_gpt4_turbo`, via PairwiseAnnotator.annotate_head2head as
`alpaca_eval.main.evaluate` calls it) against a local HTTP server answering like the tests' scripted judge
(`fixture_judge` below, the same rule as tests/bench/test_alpaca_eval.py), records every request body it sends, and
prints JSON: the requests, each row's preference, `get_winrate`, and `get_length_controlled_winrate` with the
`length_controlled_minimal` and `length_controlled_noreg` GLMs (the instruction difficulties the GLM downloads are
served from the fixture's own `instruction_difficulty` column instead).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

REQUESTS: list[dict] = []


def outputs_shown(user: str) -> tuple[str, str]:
    marker = '"output": """'
    first = user.index(marker) + len(marker)
    first_end = user.index('"""', first)
    second = user.index(marker, first_end) + len(marker)
    return user[first:first_end], user[second:user.index('"""', second)]


def fixture_judge(user: str) -> float:
    """P(model m, shown first, is better): longer and GOOD-marked answers are preferred."""
    m, big_m = outputs_shown(user)
    logit = (len(m) - len(big_m)) / 40 + 1.5 * ("GOOD" in m) - 1.5 * ("GOOD" in big_m)
    return 1 / (1 + math.exp(-logit))


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        REQUESTS.append(body)
        p = fixture_judge(body["messages"][-1]["content"])
        top = sorted([("m", math.log(p)), ("M", math.log(1 - p)), ("Both", -20.0)], key=lambda t: -t[1])
        token = top[0][0]
        content = [{"token": token, "logprob": top[0][1], "bytes": list(token.encode()),
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]}]
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": token}, "finish_reason": "length",
                              "logprobs": {"content": content}}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OPENAI_API_KEY"] = "x"
    os.environ["OPENAI_API_BASE"] = f"http://127.0.0.1:{server.server_port}/v1"
    import pandas as pd
    from alpaca_eval import annotators
    from alpaca_eval.metrics import glm_winrate, get_winrate

    reference = pd.DataFrame([{"instruction": r["prompt"], "output": r["output_1"], "generator": r["generator_1"]} for r in rows])
    model = pd.DataFrame([{"instruction": r["prompt"], "output": r["output_2"], "generator": r["generator_2"]} for r in rows])
    annotator = annotators.PairwiseAnnotator(annotators_config="weighted_alpaca_eval_gpt4_turbo", caching_path=None)
    annotations = annotator.annotate_head2head(outputs_1=reference, outputs_2=model)
    frame = pd.DataFrame(annotations)
    difficulty = {r["prompt"]: r.get("instruction_difficulty", 0.0) for r in rows}
    gamed = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    pd.DataFrame({"model": "x", "index": range(len(frame)), "instruction_difficulty": [difficulty[i] for i in frame["instruction"]]}).to_csv(gamed.name)
    glm_winrate.hf_hub_download = lambda **kw: gamed.name
    out = {
        "instructions": list(frame["instruction"]),
        "preferences": [None if pd.isna(p) else float(p) for p in frame["preference"]],
        "win_rate": {k: float(v) for k, v in get_winrate(frame).items()},
        "requests": REQUESTS,
    }
    for glm in ("length_controlled_minimal", "length_controlled_noreg"):
        lc = glm_winrate.get_length_controlled_winrate(frame.copy(), glm_name=glm, save_weights_dir=None)
        out[glm] = {k: float(v) for k, v in lc.items() if k in ("length_controlled_winrate", "lc_standard_error")}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
