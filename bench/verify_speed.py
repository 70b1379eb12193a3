"""How long `kb verify` takes: on the shipped KB, and on 10,000 generated quotes over 500 sources.

Prints wall-clock and CPU time: on a shared machine the wall clock also counts
time spent waiting for a core, the CPU time is what the check itself costs.

    python bench/verify_speed.py [--quotes 10000] [--sources 500] [--seed 0]

The generated KB is written to a temporary directory: each source is a page of
sentences over a 4,000-word vocabulary, hard-wrapped at 80 columns, and each quote
is one or two whole sentences of it (a fifth of them with a `[...]` elision, a
tenth reflowed), cited by its true lines; each source records its body's sha256,
so the hash check is timed too. Every quote must verify clean; the script fails
otherwise, so the timing is of real successful checks.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import yaml  # noqa: E402

from kb_tools.core.load import load_kb  # noqa: E402
from kb_tools.verify.quotes import PackageTexts, verify_kb  # noqa: E402

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
FRONT = ("---\ntitle: Generated source {n}\nauthor: Bench\nkind: primary\nurl: https://example.org/{n}\n"
         "published: 2020-01-01\nretrieved: 2026-11-22\ncoverage: full\nsha256: {sha}\n---\n\n")


def generate(root: str, n_sources: int, n_quotes: int, rng: random.Random) -> None:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "do", "ga"]
    vocab = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(6000)})[:4000]
    os.makedirs(os.path.join(root, "kb", "entries"))
    os.makedirs(os.path.join(root, "kb", "quotes"))
    os.makedirs(os.path.join(root, "evidence"))
    per_source = n_quotes // n_sources
    for n in range(n_sources):
        sentences = [" ".join(rng.choice(vocab) for _ in range(rng.randint(8, 18))).capitalize() + "."
                     for _ in range(per_source * 2 + 10)]
        body_lines, where = [], []
        for start in range(0, len(sentences), 5):  # paragraphs of five sentences
            para = " ".join(sentences[start:start + 5])
            wrapped = textwrap.wrap(para, 80)
            first = len(FRONT.splitlines()) + len(body_lines) + 1
            body_lines += wrapped + [""]
            # locate each sentence's first and last line within the paragraph
            pos, line_of = 0, []
            for i, w in enumerate(wrapped):
                line_of += [first + i] * (len(w) + 1)
            for s in sentences[start:start + 5]:
                at = para.index(s, pos)
                where.append((s, line_of[at], line_of[at + len(s) - 1]))
                pos = at + len(s)
        with open(os.path.join(root, "evidence", f"src-{n}.md"), "w") as fh:
            body = "\n".join(body_lines)
            sha = hashlib.sha256(("\n" + body).encode("utf-8")).hexdigest()  # the body: below the closing ---
            fh.write(FRONT.format(n=n, sha=sha) + body)
        quotes = []
        picks = rng.sample(range(len(where) - 1), per_source)
        for k, i in enumerate(picks):
            (s1, a1, b1), (s2, _, b2) = where[i], where[i + 1]
            style = k % 10
            if style < 2:
                words2 = s2.split()
                text, lines = f"{s1} [...] {' '.join(words2[len(words2) // 2:])}", [a1, b2]
            elif style == 2:
                text, lines = (s1 + " " + s2).replace(" ", "\n", 3), [a1, b2]
            else:
                text, lines = s1, [a1, b1]
            quotes.append({"id": f"q-{n}-{k}", "source": f"src-{n}", "lines": lines, "text": text,
                           "themes": ["bench"]})
        with open(os.path.join(root, "kb", "quotes", f"src-{n}.yaml"), "w") as fh:
            yaml.dump({"quotes": quotes}, fh, Dumper=DUMPER, sort_keys=False, width=100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quotes", type=int, default=10_000)
    ap.add_argument("--sources", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    # 1. the shipped KB, in-process (package texts cached by a first run) and through the CLI
    shipped = load_kb(use_cache=False)
    verify_kb(shipped)  # warms the package-text cache (imports torch once)
    t, c = time.perf_counter(), time.process_time()
    report = verify_kb(shipped)
    shipped_s, shipped_cpu = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    cli = subprocess.run([sys.executable, "-m", "kb_tools", "verify"], cwd=os.path.dirname(HERE),
                         capture_output=True, text=True)
    cli_s = time.perf_counter() - t
    print(f"shipped KB: {report.quotes} quotes, {len(report.defects)} defects, "
          f"verify_kb {shipped_s * 1000:.0f} ms wall, {shipped_cpu * 1000:.0f} ms CPU; `kb verify` end to end {cli_s * 1000:.0f} ms (exit {cli.returncode})")

    # 2. the generated KB
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as root:
        t = time.perf_counter()
        generate(root, args.sources, args.quotes, rng)
        gen_s = time.perf_counter() - t
        t = time.perf_counter()
        kb = load_kb(os.path.join(root, "kb"), use_cache=False)
        load_s = time.perf_counter() - t
        assert not kb.problems, kb.problems[:3]
        t, c = time.perf_counter(), time.process_time()
        big = verify_kb(kb, packages=PackageTexts(None))
        verify_s, verify_cpu = time.perf_counter() - t, time.process_time() - c
    print(f"generated KB: {big.quotes} quotes over {len(kb.sources)} sources ({big.sources} hashes): verify_kb {verify_s:.2f} s wall, "
          f"{verify_cpu:.2f} s CPU ({verify_cpu / max(big.quotes, 1) * 1e6:.0f} us/quote); "
          f"YAML load {load_s:.2f} s; generation {gen_s:.1f} s")
    if big.defects:
        print("unexpected defects:", *[str(d) for d in big.defects[:5]], sep="\n")
        return 1
    return 0 if report.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
