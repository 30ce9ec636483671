"""Expected LC win rates for tests/bench/test_alpaca_glm.py from AlpacaEval's own code (not a dependency of judge-mcp).

    python3 -m venv /tmp/ae_ref && /tmp/ae_ref/bin/pip install alpaca-eval==0.6.6 scikit-learn patsy
    /tmp/ae_ref/bin/python tools/alpaca_glm_reference.py tests/bench_fixtures/alpaca_glm.json

The fixture holds fixed rows (preference, output lengths, instruction difficulty; some unannotated) for several
cases and AlpacaEval's df_gamed.csv shape beside them (tests/bench_fixtures/alpaca_df_gamed.csv); this runs
`alpaca_eval.metrics.glm_winrate.get_length_controlled_winrate` on each case with the length_controlled_minimal,
_noreg and _v1 GLMs (the df_gamed.csv it downloads served from the fixture's file) and writes the results into the
fixture's `expected`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from alpaca_eval.metrics import glm_winrate


def main(path: str) -> None:
    fixture = json.loads(Path(path).read_text(encoding="utf-8"))
    gamed = str(Path(path).with_name(fixture["df_gamed"]))
    glm_winrate.hf_hub_download = lambda **kwargs: gamed  # the file AlpacaEval downloads, from the fixture
    expected = {}
    for name, rows in fixture["cases"].items():
        frame = pd.DataFrame(
            [{"instruction": f"i{k}", "output_1": "x" * r["len_1"], "output_2": "y" * r["len_2"], "preference": r["preference"],
              "generator_1": "reference", "generator_2": "model", "annotator": "weighted_alpaca_eval_gpt4_turbo"} for k, r in enumerate(rows)]
        )
        expected[name] = {}
        for glm in ("length_controlled_minimal", "length_controlled_noreg", "length_controlled_v1"):
            lc = glm_winrate.get_length_controlled_winrate(frame.copy(), glm_name=glm, save_weights_dir=None)
            expected[name][glm] = {k: float(lc[k]) for k in ("length_controlled_winrate", "lc_standard_error", "win_rate")}
    fixture["expected"] = expected
    Path(path).write_text(json.dumps(fixture, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
