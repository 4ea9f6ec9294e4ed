"""Lorebook ``/regex/`` keys (U5): the ``regex`` package with a time limit against Google's RE2
(``google-re2``, a linear-time engine), on catastrophic patterns and on ordinary ones.

Prints, per pattern and input size, the median time of one search with each engine (and whether
``regex`` hit its time limit), beside a floor: the same engine's search for a plain word in the same
text. Run: ``python benchmarks/regex_keys.py [--sizes 1000,10000,100000] [--repeats 5]``.
RE2 is optional (``pip install google-re2``); without it only ``regex`` is measured.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import regex

try:
    import re2
except ImportError:  # measured only where installed
    re2 = None

LIMIT = 0.02  # seconds: the lorebook's budget for all regex keys of one turn (REGEX_BUDGET_SECONDS)

# (name, pattern, text made from n characters)
CASES = [
    ("nested plus (a+)+$", r"(a+)+$", lambda n: "a" * n + "!"),
    ("alternation (a|aa)+$", r"(a|aa)+$", lambda n: "a" * n + "!"),
    ("words (\\w+\\s?)*$", r"^(\w+\s?)*$", lambda n: "word " * (n // 5) + "!"),
    ("ordinary \\bdragons?\\b", r"\bdragons?\b", lambda n: ("the knight rode on " * (n // 19 + 1))[:n] + " dragon"),
    ("lookahead (not RE2)", r"dragon(?= lord)", lambda n: ("the knight rode on " * (n // 19 + 1))[:n] + " dragon lord"),
]


def _time(fn: Callable[[str], object], arg: str, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(arg)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def _limited(pattern: Any, text: str, repeats: int) -> tuple[float, bool]:
    """Median milliseconds of a ``regex`` search under the time limit, and whether it timed out."""
    timed_out = False

    def search(subject: str) -> None:
        nonlocal timed_out
        try:
            pattern.search(subject, timeout=LIMIT)
        except TimeoutError:
            timed_out = True

    return _time(search, text, repeats) * 1000, timed_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'case':28} {'chars':>7} {'regex ms':>9} {'timed out':>9} {'re2 ms':>8} {'floor ms':>8}")
    for name, pattern, make in CASES:
        slow = regex.compile(pattern, regex.V0)
        fast = None
        if re2 is not None:
            try:
                fast = re2.compile(pattern)
            except re2.error:
                fast = None  # RE2 has no lookaround or backreferences
        for n in sizes:
            text = make(n)
            regex_ms, timed_out = _limited(slow, text, args.repeats)
            floor_ms = _time(text.find, "dragon", args.repeats) * 1000
            re2_ms = f"{_time(fast.search, text, args.repeats) * 1000:8.2f}" if fast else "   n/a  "
            print(f"{name:28} {n:>7} {regex_ms:9.2f} {str(timed_out):>9} {re2_ms} {floor_ms:8.3f}")

if __name__ == "__main__":
    main()
