"""End-to-end latency of `kb search` (hybrid), `kb search --lexical` and `kb search -` on a whole pasted
report (examples/issue_flat_loss.md: the report reader and kb lint), as ratios to Python's start-up.

Each timing is a fresh process, the way a person or an agent calls the tool.
`python -c pass` runs interleaved with the searches in the same loop, so load on
the shared machine affects all four alike; the ratios are the numbers to
compare. Then the same searches over 5,000 generated entries (a synthetic KB
made from the shipped one), reported as medians in milliseconds.

    python bench/search_latency.py [--runs 25] [--entries 5000] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

QUERIES = ["loss flat", "weights not updating after optimizer step",
           "RuntimeError: Error(s) in loading state_dict for Net: size mismatch for fc.weight"]


def kb_command() -> list:
    """The installed console script if there is one beside this Python, else `python -m kb_tools`."""
    script = os.path.join(os.path.dirname(sys.executable), "kb")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "kb_tools"]


REPORT = os.path.join(ROOT, "examples", "issue_flat_loss.md")  # a whole report: prose, code, log lines


def timed(cmd: list, env: dict, stdin: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, input=stdin, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def measure(kb_dir: str, runs: int, env: dict) -> dict:
    """Median milliseconds of `python -c pass`, a hybrid search and a lexical one, interleaved."""
    series = {"python_ms": [], "search_ms": [], "lexical_ms": [], "report_ms": []}
    with open(REPORT, encoding="utf-8") as fh:
        pasted = fh.read()
    for query in QUERIES:  # warm the KB cache and the OS file cache
        timed(kb_command() + ["--kb", kb_dir, "search", query, "--json"], env)
    for i in range(runs):
        query = QUERIES[i % len(QUERIES)]
        series["python_ms"].append(timed([sys.executable, "-c", "pass"], env))
        series["search_ms"].append(timed(kb_command() + ["--kb", kb_dir, "search", query, "--json"], env))
        series["lexical_ms"].append(timed(kb_command() + ["--kb", kb_dir, "search", "--lexical", query, "--json"], env))
        series["report_ms"].append(timed(kb_command() + ["--kb", kb_dir, "search", "-", "--json"], env, pasted))
    return {name: statistics.median(values) * 1000 for name, values in series.items()}


def report(label: str, m: dict) -> str:
    return (f"{label}: python -c pass {m['python_ms']:.1f} ms; kb search {m['search_ms']:.1f} ms "
            f"({m['search_ms'] / m['python_ms']:.2f}x); kb search --lexical {m['lexical_ms']:.1f} ms "
            f"({m['lexical_ms'] / m['python_ms']:.2f}x); kb search - < {os.path.basename(REPORT)} "
            f"{m['report_ms']:.1f} ms ({m['report_ms'] / m['python_ms']:.2f}x)")


def generate_kb(src_kb: str, dest: str, count: int) -> str:
    """A KB of `count` entries: the shipped ones, then renamed copies with shuffled symptoms."""
    import random

    import yaml

    from kb_tools.core.load import load_kb

    rng = random.Random(0)
    shipped = list(load_kb(src_kb, use_cache=False).entries.values())
    # plain words only: "see" before a kebab-case word, or a code span, would read as a mention of an entry (KB025)
    words = sorted({w for e in shipped for s in e.symptoms for w in s.split() if w.isalpha() and w.lower() != "see"})
    kb_dir = os.path.join(dest, "kb")
    for n in range(count):
        e = shipped[n % len(shipped)]
        eid = e.id if n < len(shipped) else f"{e.id}-v{n}"
        data = {k: v for k, v in e.to_dict().items()
                if k not in ("path", "lines", "snippet_line") and v is not None and v != {}}
        # each copy's cause gets random words, so its postings differ; its title and symptom lines (what the
        # dense side embeds) stay the shipped ones, whose vectors the MiniLM build then embeds once, not 50 times
        data.update(id=eid, aliases=[], see_also=[], evidence=[],
                    cause=e.cause + " " + " ".join(rng.sample(words, 6)))
        path = os.path.join(kb_dir, "entries", e.area, f"{eid}.yaml")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(data, fh, sort_keys=False)
    import shutil
    for name in ("synonyms.yaml", "tags.yaml"):  # the vocabulary the copied tags come from, and the synonyms
        if os.path.exists(os.path.join(src_kb, name)):
            shutil.copy(os.path.join(src_kb, name), os.path.join(kb_dir, name))
    os.makedirs(os.path.join(dest, "evidence"), exist_ok=True)
    return kb_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=25, help="fresh processes per series (default 25)")
    parser.add_argument("--entries", type=int, default=5000, help="size of the generated KB (default 5000)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from kb_tools.core.load import load_kb
    from kb_tools.core.locate import find_kb_root
    shipped = find_kb_root()
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        env = {**os.environ, "KB_CACHE_DIR": os.path.join(tmp, "cache")}
        env.pop("KB_PATH", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine: modules load from .pyc
        small = measure(shipped, args.runs, env)
        print(report(f"shipped KB ({len(load_kb(shipped).entries)} entries)", small)
              + " [targets: hybrid < 300 ms, lexical about 1.8x]", flush=True)
        big_dir = generate_kb(shipped, os.path.join(tmp, "big"), args.entries)
        big = measure(big_dir, args.runs, env)
        print(report(f"{args.entries} generated entries", big) + " [target: hybrid < 600 ms]", flush=True)
        shutil.rmtree(big_dir, ignore_errors=True)
    if args.json:
        print(json.dumps({"shipped": small, "generated": big, "entries": args.entries}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
