"""How well `kb lint` finds the KB's mistakes, how often it cries wolf, and how fast it is.

    python bench/lint_quality.py [--only corpus,bugs,real,torchfix,speed] [--split dev|test] [--misses]

1. Rule corpus (tests/lint/cases.yaml): per rule, recall over its bad examples and
   precision over every finding of that code on the whole corpus (good look-alikes
   included). These examples were written next to the rules, so they guard against
   regressions; they do not measure how the rules fare on code nobody tuned them to.
2. Real reported bugs (tests/lint/bugs/MANIFEST.yaml): public threads with a confirmed cause,
   in the users' code shapes, split by URL before any lint run. Recall on dev (used to develop
   the rules) and on the frozen test split: a case is found when a finding points at its entry.
3. Real scripts (tests/lint/real/, vendored from public repositories, see MANIFEST.yaml):
   every finding, false alarms per 10 scripts on dev (the scripts the rules were developed
   beside) and test (added later, split by identity), and each rule's precision. A finding
   counts as a false alarm unless MANIFEST.yaml records it as judged true (the mistake is
   really there) by reading the code.
4. TorchFix (an installable linter for deprecated and slow PyTorch API use) on the same
   inputs, for comparison, when it is installed.
5. Speed: `lint_source` on a 2,000-line script built from the real ones, against
   `ast.parse` of the same text in the same process (the floor any ast linter pays).
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import yaml  # noqa: E402

from kb_tools.lint.engine import RULES, lint_source  # noqa: E402

REAL = os.path.join(ROOT, "tests", "lint", "real")


def rule_corpus():
    with open(os.path.join(ROOT, "tests", "lint", "cases.yaml"), encoding="utf-8") as fh:
        cases = yaml.safe_load(fh)["cases"]
    hits = {code: [0, 0] for code in RULES}       # found, expected
    flagged = {code: [0, 0] for code in RULES}    # right, all
    for case in cases:
        found = {f.code for f in lint_source(case["source"], case["name"])}
        for code in case["expect"]:
            hits[code][1] += 1
            hits[code][0] += code in found
        for code in found:
            flagged[code][1] += 1
            flagged[code][0] += code in case["expect"]
    print(f"rule corpus: {len(cases)} cases ({sum(1 for c in cases if c['expect'])} bad, "
          f"{sum(1 for c in cases if not c['expect'])} good look-alikes)")
    print(f"{'code':8} {'name':38} {'recall':>8} {'precision':>10}")
    for code, (name, _, _) in RULES.items():
        r, p = hits[code], flagged[code]
        print(f"{code:8} {name:38} {r[0]}/{r[1]:<6} {(f'{p[0]}/{p[1]}' if p[1] else '-'):>10}")
    total_r = [sum(v[0] for v in hits.values()), sum(v[1] for v in hits.values())]
    total_p = [sum(v[0] for v in flagged.values()), sum(v[1] for v in flagged.values())]
    print(f"overall recall {total_r[0] / total_r[1]:.3f} ({total_r[0]}/{total_r[1]}), "
          f"precision {total_p[0] / max(total_p[1], 1):.3f} ({total_p[0]}/{total_p[1]})")
    return cases


def real_bugs(splits=("dev", "test"), misses=False):
    """Recall on the real reported bugs, dev and frozen test, as found (any finding for its entry).

    `splits` lets rule work look at dev alone, so the frozen test's breakdown stays out of view.
    """
    from kb_tools.lint.engine import lint_file
    with open(os.path.join(ROOT, "tests", "lint", "bugs", "MANIFEST.yaml"), encoding="utf-8") as fh:
        items = yaml.safe_load(fh)
    print(f"\nreal reported bugs: {len(items)} threads")
    for split in splits:
        part = [i for i in items if i["split"] == split]
        found = [i for i in part if any(f.entry == i["entry"] for f in lint_file(os.path.join(ROOT, i["file"])))]
        print(f"  {split:5} recall {len(found) / max(len(part), 1):.2f} ({len(found)}/{len(part)})")
        by_entry = {}
        for i in part:
            by_entry.setdefault(i["entry"], [0, 0])[1] += 1
        for i in found:
            by_entry[i["entry"]][0] += 1
        print("        " + ", ".join(f"{e} {n}/{t}" for e, (n, t) in sorted(by_entry.items())))
        if misses:
            for i in part:
                if i not in found:
                    print(f"        missed: {i['entry']:32} {i['file']}")


def real_scripts():
    with open(os.path.join(REAL, "MANIFEST.yaml"), encoding="utf-8") as fh:
        items = yaml.safe_load(fh)
    missing = [i["file"] for i in items if not os.path.exists(os.path.join(REAL, i["file"]))]
    if missing:  # third-party code is not committed: restore it as tests/lint/real/README.md says
        print(f"\nreal scripts: {len(missing)} of {len(items)} files are not restored here; measured on the rest")
        items = [i for i in items if i["file"] not in missing]
    lines = findings = false_alarms = 0
    per_split, per_rule = {}, {}
    print(f"\nreal scripts: {len(items)} files")
    for item in items:
        path = os.path.join(REAL, item["file"])
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        lines += text.count("\n") + 1
        split = item.get("split", "dev")   # the first scripts, read while the rules were written, are dev
        counts = per_split.setdefault(split, [0, 0, 0])   # scripts, findings, false alarms
        counts[0] += 1
        shaped = per_split.setdefault("  with look-alike shapes", [0, 0, 0]) if item.get("shapes") else None
        if shaped is not None:
            shaped[0] += 1
        judged = {(j["code"], j["line"]): j["verdict"] for j in item.get("judged", [])}
        for f in lint_source(text, item["file"]):
            findings += 1
            verdict = judged.get((f.code, f.line), "unjudged")
            false = str(verdict).lower() != "true"   # YAML reads `verdict: true` as a boolean
            false_alarms += false
            counts[1] += 1
            counts[2] += false
            if shaped is not None:
                shaped[1] += 1
                shaped[2] += false
            rule = per_rule.setdefault(f.code, [0, 0])
            rule[0] += not false
            rule[1] += 1
            print(f"  {f}  [{verdict}]")
    print(f"{findings} findings in {lines} lines; {false_alarms} counted as false alarms: "
          f"{1000 * false_alarms / max(lines, 1):.2f} per 1,000 lines, "
          f"{10 * false_alarms / max(len(items), 1):.2f} per 10 scripts")
    for split, (n, found, false) in sorted(per_split.items(), key=lambda kv: kv[0].startswith(" ")):
        print(f"  {split.strip():5} {n} scripts, {found} findings, {false} false alarms: "
              f"{10 * false / max(n, 1):.2f} per 10 scripts")
    print("  precision by rule: " + ", ".join(f"{code} {r[0]}/{r[1]}" for code, r in sorted(per_rule.items())))
    return [os.path.join(REAL, i["file"]) for i in items]


def torchfix(cases, real_paths):
    exe = shutil.which("torchfix") or os.path.join(os.path.dirname(sys.executable), "torchfix")
    if not os.path.exists(exe):
        print("\nTorchFix: not installed (pip install torchfix) - skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        bad = []
        for n, case in enumerate(c for c in cases if c["expect"]):
            path = os.path.join(tmp, f"case_{n}.py")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(case["source"])
            bad.append(path)
        out = subprocess.run([exe, *bad], capture_output=True, text=True).stdout
        flagged = {line.split(":", 1)[0] for line in out.splitlines() if ": TOR" in line}
        print(f"\nTorchFix: flags {len(flagged)}/{len(bad)} bad examples of the rule corpus "
              f"(it checks deprecated and slow API use, not these mistakes)")
    if real_paths:
        out = subprocess.run([exe, *real_paths], capture_output=True, text=True).stdout
        print(f"TorchFix on the real scripts: {sum(1 for line in out.splitlines() if ': TOR' in line)} findings")


def speed(real_paths):
    """Whole real scripts, concatenated until the text passes 2,000 lines (never cut mid-statement)."""
    import ast
    if not real_paths:
        print("\nspeed: no real scripts restored here - skipped")
        return
    parts, n = [], 0
    for path in sorted(real_paths):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        parts.append(text)
        n += text.count("\n")
        if n >= 2000:
            break
    text = "\n".join(parts)
    lint_times, parse_times = [], []
    for _ in range(15):
        t = time.perf_counter()
        ast.parse(text)
        parse_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        lint_source(text, "big.py")
        lint_times.append(time.perf_counter() - t)
    lint_ms, parse_ms = statistics.median(lint_times) * 1000, statistics.median(parse_times) * 1000
    print(f"\nspeed on a {text.count(chr(10))}-line script ({len(parts)} real scripts joined): lint {lint_ms:.0f} ms, "
          f"ast.parse alone {parse_ms:.0f} ms (ratio {lint_ms / parse_ms:.1f}x), medians of 15 in one process")


def main(argv=None):
    import argparse
    parts = ("corpus", "bugs", "real", "torchfix", "speed")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(parts),
                        help=f"comma-separated parts to run, of: {', '.join(parts)} (default: all)")
    parser.add_argument("--split", choices=("dev", "test"),
                        help="real reported bugs: one split only (default: both)")
    parser.add_argument("--misses", action="store_true",
                        help="real reported bugs: list the cases no finding points at")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    unknown = only - set(parts)
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}; choose from {', '.join(parts)}")
    cases = rule_corpus() if "corpus" in only or "torchfix" in only else []
    if "bugs" in only:
        real_bugs((args.split,) if args.split else ("dev", "test"), args.misses)
    paths = real_scripts() if only & {"real", "torchfix", "speed"} else []
    if "torchfix" in only:
        torchfix(cases, paths)
    if "speed" in only:
        speed(paths)


if __name__ == "__main__":
    main()
