"""Linear-time text functions: each function that reads caller or model text, timed on hostile texts (runs of every
special character, grammar openings followed by such runs) against plain prose of the same length, side by side in
this run. One row per function: its prose baseline, its worst hostile text and time, the ratio, and (with
--growth) how its time on that worst text grows when the text is FACTOR times longer (linear: FACTOR).

    .venv/bin/python -m perf.text_linear [--size 50000] [--growth [--factor 4]] [--only parsing.neutralise ...]

Not a test (tests/methods/test_linear_text.py asserts the same bounds). The baseline is the function's time on prose
or one plain Python pass over the text, whichever is longer; the worst texts of a scan are timed again side by side
with the baselines (testkit/hostile_texts.py says how).
"""

from __future__ import annotations

import argparse
import functools
import time

from testkit.hostile_texts import FUNCTIONS, SIZE, growth, hostile_shapes, python_pass_s, shaped, worst_ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE, help="characters per text (default: the input limit)")
    parser.add_argument("--growth", action="store_true", help="also time each function's worst text at FACTOR times the size")
    parser.add_argument("--factor", type=int, default=4, help="how much longer the grown text is (default: 4)")
    parser.add_argument("--only", nargs="*", default=None, help="function names to time (default: all)")
    args = parser.parse_args()
    shapes = hostile_shapes()
    texts = {name: shaped(shape, args.size) for name, shape in shapes.items()}
    names = args.only or sorted(FUNCTIONS)
    started = time.perf_counter()
    print(f"{len(texts)} hostile texts of {args.size:,} characters per function")
    unit = python_pass_s(args.size)
    print(f"one plain Python pass over {args.size:,} characters: {unit * 1000:.2f} ms")
    grown = f" {args.size * args.factor // 1000}k/{args.size // 1000}k |" if args.growth else ""
    print(f"| function | baseline ms (plain passes) | worst hostile ms | worst text | ratio |{grown}")
    print("|---|---|---|---|---|" + ("---|" if args.growth else ""))
    worst_overall, worst_growth = 0.0, 0.0
    for name in names:
        ratio, text, worst_s, base_s = worst_ratio(FUNCTIONS[name], args.size, texts)
        worst_overall = max(worst_overall, ratio)
        row = f"| {name} | {base_s * 1000:.2f} ({base_s / unit:.1f}) | {worst_s * 1000:.1f} | {text} | {ratio:.1f} |"
        if args.growth:
            times = growth(FUNCTIONS[name], functools.partial(shaped, shapes[text]), args.size, args.factor)
            worst_growth = max(worst_growth, times)
            row += f" {times:.2f} |"
        print(row, flush=True)
    print(f"worst ratio over all functions: {worst_overall:.1f}" + (f"; worst growth: {worst_growth:.2f}" if args.growth else "")
          + f" ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
