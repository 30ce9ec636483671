"""Linear-time text functions: each function that reads caller or model text, timed on hostile texts (runs of every
special character, grammar openings followed by such runs) against plain prose of the same length, side by side in
this run. One row per function: its prose baseline, its worst hostile text and time, and the ratio.

    .venv/bin/python -m perf.text_linear [--size 50000] [--only parsing.neutralise ...]

Not a test (tests/methods/test_linear_text.py asserts a bound on the same ratio). The baseline is the function's
time on prose or one plain Python pass over the text, whichever is longer (see tests/text_attacks.py).
"""

from __future__ import annotations

import argparse
import time

from testkit.hostile_texts import FUNCTIONS, SIZE, hostile_texts, python_pass_s, worst_ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE, help="characters per text (default: the input limit)")
    parser.add_argument("--only", nargs="*", default=None, help="function names to time (default: all)")
    args = parser.parse_args()
    texts = hostile_texts(args.size)
    names = args.only or sorted(FUNCTIONS)
    started = time.perf_counter()
    print(f"{len(texts)} hostile texts of {args.size:,} characters per function")
    unit = python_pass_s(args.size)
    print(f"one plain Python pass over {args.size:,} characters: {unit * 1000:.2f} ms")
    print("| function | baseline ms (plain passes) | worst hostile ms | worst text | ratio |")
    print("|---|---|---|---|---|")
    worst_overall = 0.0
    for name in names:
        ratio, text, worst_s, base_s = worst_ratio(FUNCTIONS[name], args.size, texts)
        worst_overall = max(worst_overall, ratio)
        print(f"| {name} | {base_s * 1000:.2f} ({base_s / unit:.1f}) | {worst_s * 1000:.1f} | {text} | {ratio:.1f} |", flush=True)
    print(f"worst ratio over all functions: {worst_overall:.1f} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
