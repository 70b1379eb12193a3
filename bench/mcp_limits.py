"""What the MCP server's argument limits cost: `verify_quote` on the longest text it accepts, and the
refusal of one it does not, as ratios to a one-sentence quote checked in the same invocation.

The tests only check that these calls end (tests/test_mcp.py: a hang guard); how long they take
is measured here, interleaved, so load on the shared machine falls on all of them alike.

    python bench/mcp_limits.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.core.load import load_kb  # noqa: E402
from kb_tools.core.util import KBError  # noqa: E402
from kb_tools.render.agents import MAX_QUOTE_CHARS, verify_text  # noqa: E402


def timed(call) -> float:
    start = time.perf_counter()
    try:
        call()
    except KBError:
        pass
    return time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    kb = load_kb(os.path.join(ROOT, "kb"))
    quote = next(iter(kb.quotes.values()))
    source = max(kb.sources.values(), key=lambda s: os.path.getsize(os.path.join(os.path.dirname(kb.root), s.path)))
    with open(os.path.join(os.path.dirname(kb.root), source.path), encoding="utf-8") as fh:
        words = fh.read().split()
    longest = " ".join(words[len(words) // 2:])[:MAX_QUOTE_CHARS].rsplit(" ", 1)[0]
    cases = {
        "one quote (baseline)": lambda: verify_text(kb, quote.text, quote.source, lines=quote.lines,
                                                    object_path=quote.object),
        f"{len(longest)} characters of the largest source": lambda: verify_text(kb, longest, source.id),
        "20 elided parts": lambda: verify_text(kb, " ... ".join(words[:20]), source.id),
        "1 MB, refused": lambda: verify_text(kb, "the " * 250_000, source.id),
    }
    times = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, call in cases.items():
            times[name].append(timed(call))
    base = statistics.median(times["one quote (baseline)"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:<45} median {median * 1000:8.1f} ms   {median / base:6.1f}x the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
