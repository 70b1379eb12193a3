"""Cross-validated gain of fitting the static vectors on labelled real reports as well.

`scripts/adapt_embeddings.py --real FILE` adds real reports to the self-written ones. Whether
that helps cannot be read off the reports it was fitted on, and the dev split alone is small, so
this script pools labelled real-report files (never the frozen test split), cuts them into K
folds by thread, fits once per fold without that fold, and ranks each fold's reports with the
vectors that never saw them. The baseline is the fit on the self-written reports alone, ranked on
the same reports. Needs torch (for the fit); slow: K fits of about 90 s each, two at a time.

    python bench/adapt_cv.py --base <step 2's folder> --weight 1 POOL.yaml [POOL.yaml ...]

`--fit-args "--tau 0.2"` passes settings to every fit (scripts/adapt_embeddings.py --help lists
them) and `--device cuda` runs the fits on a GPU, `--jobs` at a time (the bytes then differ from a
CPU fit, the cross-validated figures hardly: settings are compared on the same device);
`--no-baseline` skips the fit on the self-written reports alone.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.search.embedders import static as embed  # noqa: E402
from kb_tools.core.load import load_kb  # noqa: E402
from kb_tools.search.index import build_index  # noqa: E402
from kb_tools.search.evaluate import load_queries  # noqa: E402
from kb_tools.search.rank import rank  # noqa: E402
from search_quality import DEPTHS, depth_shares, metrics, reciprocal_ranks  # noqa: E402  (bench/ is on the path: this file's folder)

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from adapt_embeddings import MEASURING  # noqa: E402

FIT = os.path.join(ROOT, "scripts", "adapt_embeddings.py")
DEEPEST = max(DEPTHS)


def fold_of(query: dict, folds: int) -> int:
    """A thread's fold, from its URL alone: the same thread always lands in the same fold."""
    return int(hashlib.sha256(query["source"].encode()).hexdigest(), 16) % folds


def fit(base: str, out: str, real: list, weight: float, extra: tuple = ()) -> None:
    cmd = [sys.executable, FIT, "--base", base, "--out", out, *extra]
    if real:
        import yaml
        path = os.path.join(out, "real.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump({"queries": real}, fh, allow_unicode=True)
        cmd += ["--real", path, "--real-weight", str(weight)]
    subprocess.run(cmd, check=True, capture_output=True)


def ranks(kb, vectors: str, queries: list) -> list:
    """Each query's rank of its first acceptable entry (None past DEEPEST), hybrid ranking."""
    index = build_index(kb, embed.load(vectors))
    return reciprocal_ranks(queries, lambda q, k: [h.id for h in rank(index, q, k)], depth=DEEPEST)


def summary(found: list) -> str:
    m = metrics(found)
    deep = "  ".join(f"top {d} {share:.3f}" for d, share in depth_shares(found).items())
    return f"hit@1 {m['hit@1']:.3f}  hit@3 {m['hit@3']:.3f}  MRR {m['mrr']:.3f}  ({deep})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pool", nargs="+", help="labelled real-report files (not the test split)")
    parser.add_argument("--base", required=True, help="folder with step 2's static-minilm.* files")
    parser.add_argument("--weight", type=float, default=1.0, help="--real-weight of the fit (shipped: 1)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--fit-args", default="", help="more options for every fit, as one string")
    parser.add_argument("--device", default="cpu", help="torch device of the fits")
    parser.add_argument("--jobs", type=int, default=2, help="fits run at once")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the fit on the self-written reports alone")
    args = parser.parse_args()
    extra = tuple(shlex.split(args.fit_args)) + ("--device", args.device)
    measuring = [p for p in args.pool if os.path.realpath(p) in {os.path.realpath(m) for m in MEASURING}]
    if measuring:
        parser.error(f"{measuring[0]}: the frozen test split and the fresh reports are reported on, never fitted on")
    pool = [q for path in args.pool for q in load_queries(path)]
    kb = load_kb(os.path.join(ROOT, "kb"), use_cache=False)
    with tempfile.TemporaryDirectory(prefix="adapt-cv-") as tmp:
        jobs = {} if args.no_baseline else {"without": (os.path.join(tmp, "without"), [])}
        for k in range(args.folds):
            rest = [{"query": q["query"], "expect": q["expect"], "source": q["source"]}
                    for q in pool if fold_of(q, args.folds) != k]
            jobs[k] = (os.path.join(tmp, f"fold{k}"), rest)
        for out, _ in jobs.values():
            os.makedirs(out)
        with ThreadPoolExecutor(args.jobs) as workers:
            list(workers.map(lambda job: fit(args.base, job[0], job[1], args.weight, extra), jobs.values()))
            print(f"{len(jobs)} fits done", file=sys.stderr)
        base = None if args.no_baseline else ranks(kb, jobs["without"][0], pool)
        held = [None] * len(pool)
        for k in range(args.folds):
            mine = [i for i, q in enumerate(pool) if fold_of(q, args.folds) == k]
            for i, r in zip(mine, ranks(kb, jobs[k][0], [pool[i] for i in mine])):
                held[i] = r
    print(f"{len(pool)} real reports, {args.folds} folds, weight {args.weight}"
          + (f", fit {args.fit_args}" if args.fit_args else ""))
    if base is not None:
        print(f"self-written reports only:        {summary(base)}")
    print(f"plus the other folds' real ones:  {summary(held)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
