"""Run `kb lint` over every Python file of many repositories: does it ever crash, and how slow is the
slowest file?

    python bench/lint_sweep.py CLONES [--per-repo N] [--findings FILE]

CLONES is a folder of git clones or bare mirrors (the one `scripts/restore_corpus.py` reads), each
`owner+name/` holding a repository (or a `repo/` inside it). Each repository's `.py` files at HEAD
(the first N by path, 400 by default) are read with `git show` and linted in this process. A file
that does not parse is counted apart (kb lint reports it as one finding; that is not a crash); any
other exception is a crash and is printed with its file. The slowest file is reported with its line
count and, beside it, `ast.parse` of the same text, so the figure reads as a ratio on a shared
machine. Nothing is written.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.lint.engine import lint_source  # noqa: E402

LARGEST = 300_000   # characters: generated files past this are skipped


def _repositories(clones: str) -> list:
    out = []
    for name in sorted(os.listdir(clones)):
        for path in (os.path.join(clones, name, "repo"), os.path.join(clones, name)):
            if os.path.isdir(path) and subprocess.run(["git", "-C", path, "rev-parse", "--git-dir"],
                                                      capture_output=True).returncode == 0:
                out.append((name, path))
                break
    return out


def _python_files(repo: str, limit: int) -> list:
    listed = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "HEAD", "--name-only"],
                            capture_output=True, text=True).stdout.splitlines()
    return [p for p in listed if p.endswith(".py")][:limit]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("clones", help="folder of clones named owner+name")
    parser.add_argument("--per-repo", type=int, default=400, metavar="N", help="files per repository (default 400)")
    parser.add_argument("--findings", metavar="FILE", help="also write every finding to FILE, one JSON object a line")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.clones):
        parser.error(f"{args.clones}: no such folder")
    found = []
    files = unparsable = crashes = findings = lines = 0
    slowest = (0.0, "", 0, "")
    repositories = _repositories(args.clones)
    for k, (name, repo) in enumerate(repositories, 1):
        print(f"[{k}/{len(repositories)}] {name}", file=sys.stderr)
        for path in _python_files(repo, args.per_repo):
            data = subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True).stdout
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(text) > LARGEST:
                continue
            files += 1
            lines += text.count("\n")
            start = time.perf_counter()
            try:
                these = lint_source(text, path)
                findings += len(these)
                found += [{"repo": name, "path": path, "line": f.line, "code": f.code} for f in these]
            except SyntaxError:
                unparsable += 1
            except Exception as exc:   # the point of the sweep: any other exception is a crash
                crashes += 1
                print(f"CRASH {name}:{path}: {type(exc).__name__}: {exc}")
            took = time.perf_counter() - start
            if took > slowest[0]:
                slowest = (took, f"{name}:{path}", text.count("\n"), text)
    print(f"{files} files ({lines:,} lines) in {len(repositories)} repositories: {crashes} crashes, "
          f"{unparsable} that do not parse, {findings} findings")
    if slowest[1]:
        start = time.perf_counter()
        try:
            ast.parse(slowest[3])
        except SyntaxError:
            pass
        parse = time.perf_counter() - start
        print(f"slowest: {slowest[1]} ({slowest[2]:,} lines) {slowest[0] * 1000:.0f} ms, "
              f"ast.parse alone {parse * 1000:.0f} ms ({slowest[0] / max(parse, 1e-9):.1f}x)")
    if args.findings:
        temporary = args.findings + ".part"
        with open(temporary, "w") as out:
            out.writelines(json.dumps(f) + "\n" for f in found)
        os.replace(temporary, args.findings)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
