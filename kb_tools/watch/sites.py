"""Where the user's code did something (the file:line a report names), and the signal that ends a
watched run after --steps N. Kept apart from the session so that the hooks, the checks and the
session can all use them without importing one another."""
from __future__ import annotations

import contextlib
import functools
import os
import runpy
import sys
import types

import torch


class StopWatching(BaseException):
    """Raised from a hook once --steps N steps ran (and the evaluation pass after them ended); the
    runner catches it.

    A BaseException, so that the user's `except Exception` does not swallow it and their
    `finally` blocks still run."""


# ---------------------------------------------------------------- where the user's code did something

_SKIP_DIRS = tuple(os.path.dirname(str(m.__file__)) + os.sep for m in (torch,)) + (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)  # kb_tools/
_SKIP_FILES = frozenset(m.__file__ for m in (runpy, contextlib, functools))


def library_file(filename: str) -> bool:
    """Whether code in this file is torch's, kb_tools' or the runner's, not the user's."""
    return filename.startswith(_SKIP_DIRS) or filename.startswith("<frozen") or filename in _SKIP_FILES


def show_path(filename: str) -> str:
    """A file name as the user knows it: relative to the working directory when under it."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith(os.pardir) else rel


def user_site(depth: int = 2, constructing=None) -> str | None:
    """file:line of the first frame outside torch, kb_tools and the runner: where the user's code
    made the call. With `constructing`, the __init__ frames of that very object are skipped too,
    so that a model built by `Net()` is placed at that line, not inside Net.__init__."""
    frame: types.FrameType | None = sys._getframe(depth)
    while frame is not None:
        code = frame.f_code
        if not library_file(code.co_filename):
            if constructing is None or code.co_name != "__init__" or frame.f_locals.get("self") is not constructing:
                return f"{show_path(code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def caller_is_torch(depth: int = 2) -> bool:
    """Whether the nearest frame outside kb_tools and torch.nn's module machinery is inside torch
    (torch.optim.swa_utils.update_bn runs a model this way), i.e. not the user's own call."""
    frame: types.FrameType | None = sys._getframe(depth)
    module_py = os.path.join("torch", "nn", "modules", "module.py")
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_SKIP_DIRS[-1]) or name.endswith(module_py)):
            return name.startswith(_SKIP_DIRS[:-1])
        frame = frame.f_back
    return False
