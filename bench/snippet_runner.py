"""The snippet runner's cost: a fresh interpreter per snippet (the old runner) against a child of
the fork server (torch imported and warmed once), over the same snippets in the same invocation.

Both runners run every plain-python snippet of the KB on CPU with the same environment, two at a
time (as `make test` runs them under `-n 2`); the two passes are interleaved in rounds so that load
on the shared machine falls on both alike. With --torchrun, the `launch: torchrun` snippets
instead: torchrun itself against two ranks forked from the server. Reported: each pass's wall
time, the ratio, and the snippets' own CPU time, which neither runner can save.

    python bench/snippet_runner.py [--rounds 1] [--jobs 2] [--ids A B ...] [--torchrun] [--json]
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.snippets import runner as snippets  # noqa: E402
from kb_tools.core.load import load_kb  # noqa: E402


def one_pass(entries: list, forked: bool, jobs: int) -> dict:
    """Run every snippet once with the given runner; wall seconds for the whole pass."""
    if forked:
        os.environ.pop(snippets.FORK_SERVER_VAR, None)
    else:
        os.environ[snippets.FORK_SERVER_VAR] = "0"
    start = time.perf_counter()
    with futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = list(pool.map(lambda e: snippets.run_snippet(e, "cpu"), entries))
    wall = time.perf_counter() - start
    snippets.close_fork_servers()  # the next forked pass pays the server start-up again, as a test run does
    os.environ.pop(snippets.FORK_SERVER_VAR, None)
    return {"wall": wall, "passed": sum(r.passed for r in runs), "runs": len(runs),
            "child_cpu": sum(r.cpu_seconds or 0 for r in runs) if forked else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="pairs of passes (default 1)")
    ap.add_argument("--jobs", type=int, default=2, help="snippets at once (default 2, as make test)")
    ap.add_argument("--ids", nargs="*", help="only these entries (default: every plain-python snippet)")
    ap.add_argument("--torchrun", action="store_true", help="the launch: torchrun snippets instead")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not snippets.fork_server_usable():
        print("the fork server is not usable here (Linux only, KB_SNIPPET_FORK=0 unset)", file=sys.stderr)
        return 2
    kb = load_kb(os.path.join(ROOT, "kb"), use_cache=False)
    entries = [kb.entries[i] for i in args.ids] if args.ids else \
        [e for e in sorted(kb.entries.values(), key=lambda e: e.id) if (e.launch == "torchrun") == args.torchrun]
    old, new = [], []
    old_name = "torchrun" if args.torchrun else "fresh interpreter"
    for n in range(args.rounds):
        order = [(False, old), (True, new)] if n % 2 == 0 else [(True, new), (False, old)]
        for forked, out in order:
            out.append(one_pass(entries, forked, args.jobs))
            print(f"round {n + 1}: {'fork server' if forked else old_name} "
                  f"{out[-1]['wall']:.1f}s ({out[-1]['passed']}/{out[-1]['runs']} passed)", file=sys.stderr)
    old_wall, new_wall = statistics.median(p["wall"] for p in old), statistics.median(p["wall"] for p in new)
    report = {"snippets": len(entries), "jobs": args.jobs, "rounds": args.rounds,
              "fresh_interpreter_s": round(old_wall, 1), "fork_server_s": round(new_wall, 1),
              "ratio": round(new_wall / old_wall, 3),
              "snippet_cpu_s": round(statistics.median(p["child_cpu"] for p in new), 1)}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"{len(entries)} snippets, {args.jobs} at a time: {old_name} {old_wall:.1f}s, "
              f"fork server {new_wall:.1f}s, ratio {report['ratio']:.2f} "
              f"(the snippets' own CPU time: {report['snippet_cpu_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
