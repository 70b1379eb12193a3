"""Split the collected real reports into a dev set and a frozen test set, by source thread.

    python scripts/split_reports.py tests/real_reports/github.yaml tests/real_reports/forums.yaml

A thread's side is decided by the sha256 of its normalised URL (no fragment,
query or trailing slash), so two queries from one thread never straddle the
split and the assignment does not depend on order or on the ranking. Writes
tests/real_reports/dev.yaml and test.yaml (atomically); tune on dev only.
"""
from __future__ import annotations

import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kb_tools.core.util import write_atomic  # noqa: E402
from kb_tools.search.evaluate import side, thread_key  # noqa: E402

OUT = os.path.join(ROOT, "tests", "real_reports")


def main(paths) -> int:
    split = {"dev": [], "test": []}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
        for q in data.get("queries") or []:
            split[side(q["source"])].append({k: q[k] for k in ("query", "expect", "source", "note") if k in q}
                                            | {"kind": "real", "from": os.path.basename(path)})
    for name, queries in split.items():
        head = (f"# Real user reports, {name} split ({'frozen: report on it, never tune on it' if name == 'test' else 'for tuning'}).\n"
                "# Made by scripts/split_reports.py from the collected files; split by source thread.\n")
        write_atomic(os.path.join(OUT, f"{name}.yaml"),
                     head + yaml.safe_dump({"queries": queries}, sort_keys=False, allow_unicode=True, width=100))
        threads = {thread_key(q["source"]) for q in queries}
        print(f"{name}: {len(queries)} queries from {len(threads)} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
