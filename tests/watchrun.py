"""`kb watch` run in this process, as `kb watch -- python SCRIPT` runs a script when the python named
is the one running kb: torch is imported once for all the scripts a test module watches. Imports
torch, so a test module that must run without it imports this inside its torch-needing tests."""
from __future__ import annotations

import contextlib
import io
import os

import torch

from kb_tools import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kb_watch(*argv, cwd=ROOT):
    """`kb watch ARGV` in this process, torch on one thread: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["watch", *argv])
    finally:
        os.chdir(here)
        torch.set_num_threads(threads)
    return code, out.getvalue(), err.getvalue()
