"""Regenerate the reference blocks of README.md and CONTRIBUTING.md from the code.

    python scripts/generate_docs.py          # rewrite the blocks that are out of date
    python scripts/generate_docs.py --check  # exit 1 and print the diff if any block is stale

The blocks are the field tables, the diagnostic codes, every command's usage, the
shipped counts and the README's example outputs, each made by running its command
on this checkout (about ten seconds: a snippet imports torch; see kb_tools/docs.py).
tests/test_docs.py runs the check.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.docs import update_docs  # noqa: E402
from kb_tools.core.load import load_kb  # noqa: E402
from kb_tools.core.util import KBError  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a block is stale")
    args = parser.parse_args(argv)
    try:
        kb = load_kb(os.path.join(ROOT, "kb"), use_cache=False)
        changed = update_docs(ROOT, kb, check=args.check)
    except KBError as exc:
        print(f"generate_docs: {exc}", file=sys.stderr)
        return 2
    for name, diff in changed:
        print(diff if args.check else f"updated {name}")
    if args.check and changed:
        print(f"generate_docs: {', '.join(n for n, _ in changed)} out of date: run python scripts/generate_docs.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
