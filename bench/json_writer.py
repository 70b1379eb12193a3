"""Does the hand-written JSON writer (fastpath.to_json) still pay for itself?

`kb search --json` would otherwise import json, which imports re. Measured in fresh
processes, interleaved so that load on a shared machine hits every variant alike:
Python's start-up alone, start-up plus `import json`, and a whole cached
`kb search --json` (the thing the import would be added to). Prints medians and
the import's cost as a share of the search.

    python bench/json_writer.py [RUNS]
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import json'": [sys.executable, "-c", "import json"],
    "kb search --json (cached)": [sys.executable, "-m", "kb_tools", "search", "loss flat", "--json", "--lexical"],
}


def main(runs: int = 40) -> None:
    times = {name: [] for name in VARIANTS}
    subprocess.run(VARIANTS["kb search --json (cached)"], cwd=ROOT, capture_output=True, check=True)  # warm the cache
    for _ in range(runs):
        for name, cmd in VARIANTS.items():
            start = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)
            times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(t) * 1000 for name, t in times.items()}
    for name, ms in med.items():
        print(f"{name:28s} {ms:7.2f} ms (median of {runs})")
    json_cost = med["python -c 'import json'"] - med["python -c pass"]
    search = med["kb search --json (cached)"]
    print(f"import json costs {json_cost:.2f} ms = {json_cost / search:.1%} of a cached lexical `kb search --json` "
          f"({json_cost / (search - med['python -c pass']):.1%} of what the search adds to start-up)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
