"""How far each snippet's asserts and figures move with the machine: kernel path, threads, seed.

A user pastes a snippet into their own shell, whose torch picks its own CPU kernels (AVX2,
AVX-512, ...) and thread count, and whose random draws differ once they change a seed. Every
snippet is run under each combination of

    ATEN_CPU_CAPABILITY  default, avx2, avx512 (those this CPU has)
    OMP_NUM_THREADS      1, 2
    seed offset          0 (the shipped seeds) and 1000, 2000, 3000, 4000 (every seed call moved)

and the report says, per entry: how many runs passed (an assert that fails on some run claims
too much), and per figure the range printed over all runs beside the entry's claim and whether
the claim held on every run. The entries' figures are stated as that range or a bound.

    python bench/figure_spread.py [--ids A B ...] [--jobs 2] [--json out.json] [--markdown]
    python bench/figure_spread.py --only-failing --json build/spread.json   # what to fix
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.snippets import runner as snippets  # noqa: E402
from kb_tools.core.load import load_kb  # noqa: E402

SEED_OFFSETS = (0, 1000, 2000, 3000, 4000)
THREADS = (1, 2)
CAPABILITIES = ("default", "avx2", "avx512")


def cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def capabilities_here() -> list:
    """The kernel paths this CPU can run: default always; avx2 and avx512 when the CPU has them."""
    flags, found = cpu_flags(), ["default"]
    if "avx2" in flags:
        found.append("avx2")
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        found.append("avx512")
    return found


def environment(capability: str, threads: int) -> dict:
    env = snippets.child_env("cpu")
    env["ATEN_CPU_CAPABILITY"] = capability
    env["OMP_NUM_THREADS"] = str(threads)
    # idle OpenMP threads sleep instead of spinning: the same kernels and the same numbers, but a
    # 2-thread run beside other work no longer takes ten times its CPU time in barrier spins
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def run_case(entry, capability: str, threads: int, offset: int, timeout: float) -> dict:
    text = snippets.with_seed_offset(entry.snippet, offset)
    run = snippets.run_snippet(entry, "cpu", timeout=timeout, script=text, env=environment(capability, threads))
    failure = "" if run.passed else ("timed out" if run.timed_out else
                                     "\n".join((run.stderr or "").strip().splitlines()[-3:]))
    return {"capability": capability, "threads": threads, "seed_offset": offset, "passed": run.passed,
            "figures": snippets.printed_figures(run.stdout), "seconds": round(run.seconds, 2),
            "cpu_seconds": run.cpu_seconds, "failure": failure}


def numbers(value: str) -> list:
    return [float(m.group(0)) for m in snippets._PRINTED_NUM.finditer(value)]


def summarize(entry, runs: list) -> dict:
    """Per figure: the claim, every distinct value printed, the numeric span, whether the claim held."""
    figures = {}
    for name, claim in (entry.figures or {}).items():
        printed = [r["figures"].get(name) for r in runs if r["passed"]]
        values = sorted({p for p in printed if p is not None}, key=lambda v: (numbers(v), v))
        nums = [numbers(v) for v in values]
        span = [[min(col), max(col)] for col in zip(*nums)] if nums and all(len(n) == len(nums[0]) for n in nums) else None
        figures[name] = {"claim": claim, "values": values, "span": span,
                         "holds": all(p is not None and snippets.claim_holds(claim, p) for p in printed)}
    failed = [r for r in runs if not r["passed"]]
    return {"id": entry.id, "runs": len(runs), "passed": len(runs) - len(failed), "figures": figures,
            "failures": [{k: r[k] for k in ("capability", "threads", "seed_offset", "failure")} for r in failed],
            "cpu_seconds": [min(r["cpu_seconds"] or 0 for r in runs), max(r["cpu_seconds"] or 0 for r in runs)]}


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def suggest_claim(values: list, margin: float = 0.1) -> str | None:
    """A claim that covers every printed value with `margin` to spare (ranges widened by that share of
    their ends, rounded outward at the printed precision; a constant stays exact); None when the
    printed values do not share one shape."""
    import math
    if not values:
        return None
    if len(set(values)) == 1:
        return values[0]
    shapes = {snippets._PRINTED_NUM.sub("\x00", v) for v in values}
    if len(shapes) != 1:
        return None
    columns = list(zip(*[[m.group(0) for m in snippets._PRINTED_NUM.finditer(v)] for v in values]))
    parts = []
    for column in columns:
        nums = [float(c) for c in column]
        lo, hi, d = min(nums), max(nums), max(map(_decimals, column))
        if lo == hi:
            parts.append(column[0])
            continue
        step = 10 ** -d
        low = math.floor(lo * (1 - margin if lo > 0 else 1 + margin) / step) * step
        high = math.ceil(hi * (1 + margin if hi > 0 else 1 - margin) / step) * step
        if lo >= 0:
            low = max(low, 0.0)
        parts.append(f"{low:.{d}f}-{high:.{d}f}")
    shape, out = shapes.pop(), []
    for piece, part in zip(shape.split("\x00"), parts + [""]):
        out.append(piece + part)
    return "".join(out)


def fmt_span(span) -> str:
    if not span:
        return "-"
    return " / ".join(f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}" for lo, hi in span)


def _read_log(path: str, runs: dict) -> set:
    """The runs an earlier, interrupted invocation logged: put into `runs`, returned as keys."""
    done = set()
    if not os.path.exists(path):
        return done
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                run = json.loads(line)
            except ValueError:  # the line being written when it was stopped
                continue
            entry_id = run.pop("id", None)
            if entry_id in runs:
                runs[entry_id].append(run)
                done.add((entry_id, run["capability"], run["threads"], run["seed_offset"]))
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ids", nargs="*", help="only these entries (default: all)")
    ap.add_argument("--capabilities", default=",".join(capabilities_here()),
                    help="ATEN_CPU_CAPABILITY values (default: those this CPU has)")
    ap.add_argument("--threads", default=",".join(map(str, THREADS)))
    ap.add_argument("--seeds", default=",".join(map(str, SEED_OFFSETS)), help="seed offsets, 0 = as shipped")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                    help="cores to use: one-thread runs go this many at a time, two-thread runs half as many")
    ap.add_argument("--timeout", type=float, default=snippets.DEFAULT_TIMEOUT, help="CPU seconds per thread")
    ap.add_argument("--json", metavar="FILE", help="write every run and the summary here")
    ap.add_argument("--log", metavar="FILE", help="append each run to FILE as one JSON line when it ends, and skip "
                    "the runs already there: an interrupted measurement resumes where it stopped")
    ap.add_argument("--markdown", action="store_true", help="print the summary as a Markdown table")
    ap.add_argument("--only-failing", action="store_true", help="list only entries with a failed run or claim")
    args = ap.parse_args(argv)

    kb = load_kb(os.path.join(ROOT, "kb"), use_cache=False)
    entries = [kb.entries[i] for i in args.ids] if args.ids else sorted(kb.entries.values(), key=lambda e: e.id)
    caps = [c for c in args.capabilities.split(",") if c]
    threads = [int(t) for t in args.threads.split(",") if t]
    offsets = [int(s) for s in args.seeds.split(",") if s]
    cases = [(e, c, t, o) for e in entries for c in caps for t in threads for o in offsets]
    runs = {e.id: [] for e in entries}
    logged = _read_log(args.log, runs) if args.log else set()
    cases = [case for case in cases if (case[0].id, case[1], case[2], case[3]) not in logged]
    print(f"{len(entries)} entries x {len(caps)} kernel paths ({', '.join(caps)}) x {len(threads)} thread "
          f"counts x {len(offsets)} seeds: {len(cases)} runs to go ({len(logged)} already in the log), "
          f"{args.jobs} at a time", file=sys.stderr)
    start, done = time.perf_counter(), 0
    log = open(args.log, "a", encoding="utf-8") if args.log else None
    # a run gets as many cores as it has threads: two 2-thread runs on two cores spin in OpenMP's
    # barriers and take ten times as long, which is not what a user's machine does
    for width in sorted(set(threads)):
        phase = [case for case in cases if case[2] == width]
        with futures.ThreadPoolExecutor(max_workers=max(1, args.jobs // width)) as pool:
            jobs = {pool.submit(run_case, e, c, t, o, args.timeout): e.id for e, c, t, o in phase}
            for job in futures.as_completed(jobs):
                result = job.result()
                runs[jobs[job]].append(result)
                if log is not None:
                    log.write(json.dumps({"id": jobs[job], **result}) + "\n")
                    log.flush()
                done += 1
                if not result["passed"]:
                    last = result["failure"].splitlines()[-1] if result["failure"] else ""
                    print(f"  FAILED {jobs[job]} {result['capability']} threads={result['threads']} "
                          f"seed+{result['seed_offset']}: {last}", file=sys.stderr)
                if done % 20 == 0 or done == len(cases):
                    print(f"  {done}/{len(cases)} runs, {time.perf_counter() - start:.0f}s", file=sys.stderr)
        snippets.close_fork_servers()
    snippets.close_fork_servers()
    summary = [summarize(e, runs[e.id]) for e in entries]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"capabilities": caps, "threads": threads, "seed_offsets": offsets,
                       "summary": summary, "runs": runs}, fh, indent=1)
    shown = [s for s in summary if not args.only_failing or s["passed"] < s["runs"]
             or not all(f["holds"] for f in s["figures"].values())]
    if args.markdown:
        print("| entry | runs passed | figure: claim / printed over all runs |")
        print("|---|---|---|")
        for s in shown:
            figs = "; ".join(f"{n}: {f['claim']} / {fmt_span(f['span']) if f['span'] else ', '.join(f['values'])}"
                             + ("" if f["holds"] else " **(claim fails)**") for n, f in s["figures"].items())
            print(f"| {s['id']} | {s['passed']}/{s['runs']} | {figs or '-'} |")
    else:
        for s in shown:
            bad = [n for n, f in s["figures"].items() if not f["holds"]]
            print(f"{s['id']:<40} {s['passed']:>3}/{s['runs']:<3} cpu {s['cpu_seconds'][0]:.1f}-{s['cpu_seconds'][1]:.1f}s"
                  + (f"  claims failing: {', '.join(bad)}" if bad else ""))
            for name in bad:
                f = s["figures"][name]
                print(f"    {name}: claim {f['claim']!r}, printed {', '.join(f['values'][:8])}"
                      f"{' ...' if len(f['values']) > 8 else ''}; covering claim: {suggest_claim(f['values'])!r}")
            for f in s["failures"][:3]:
                last = f["failure"].splitlines()[-1] if f["failure"] else ""
                print(f"    {f['capability']} t{f['threads']} seed+{f['seed_offset']}: {last[:150]}")
    failing = sum(1 for s in summary if s["passed"] < s["runs"] or not all(f["holds"] for f in s["figures"].values()))
    print(f"{failing} of {len(summary)} entries with a failed run or a claim that did not hold; "
          f"{time.perf_counter() - start:.0f}s", file=sys.stderr)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
