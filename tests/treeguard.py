"""The checkout's state as git sees it: the suite compares it before and after a run, so a test
that rewrites a tracked file fails the run (conftest.py)."""
from __future__ import annotations

import os
import subprocess

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git_status(top: str = CHECKOUT) -> str | None:
    """`git status --porcelain` of the checkout (tracked changes and untracked files git does not
    ignore), or None outside a git work tree."""
    try:
        proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=top,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None
