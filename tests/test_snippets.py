"""Every entry's snippet, run for real on each device: one test per (entry, device).

Collected by conftest.py's hook as items named like `double-softmax[cpu]`; a
failure is reported at the YAML line that holds the failing snippet line.
"""
from __future__ import annotations

import functools
import os
import platform

import pytest

from kb_tools.snippets import runner as snippets
from kb_tools.snippets import verified
from kb_tools.core.load import load_kb
from kb_tools.core.locate import find_kb_root


class SnippetFailed(Exception):
    def __init__(self, run):
        self.run = run


class FiguresDrifted(Exception):
    def __init__(self, run, problems):
        self.run, self.problems = run, problems


@functools.lru_cache(maxsize=None)
def loaded_kb(root: str):
    """The KB under test, parsed once per process when its first snippet runs (not at collection)."""
    kb = load_kb(root, use_cache=False)
    assert not kb.problems, "\n".join(map(str, kb.problems))
    return kb


def entry_ids(root: str) -> list:
    """The entries' ids from their file names: enough to collect one item per (entry, device)."""
    top = os.path.join(root, "entries")
    return sorted(name[:-5] for area in sorted(os.listdir(top)) if os.path.isdir(os.path.join(top, area))
                  for name in os.listdir(os.path.join(top, area)) if name.endswith(".yaml"))


class SnippetItem(pytest.Item):
    def __init__(self, *, entry_id, device, kb_root, **kwargs):
        super().__init__(**kwargs)
        self.entry_id, self.device, self.entry_kb_root = entry_id, device, kb_root

    @property
    def entry(self):
        return loaded_kb(self.entry_kb_root).entries[self.entry_id]

    def runtest(self):
        reason = snippets.device_skip_reason(self.entry, self.device)
        if reason:
            pytest.skip(reason)
        # what conftest.py records in build/verified/results.json ($KB_RECORD_DIR), passed or failed
        sha = verified.snippet_sha256(snippets.script_text(self.entry))
        self.user_properties += [("snippet_sha256", sha), ("device_name", device_name(self.device)),
                                 ("torch", torch_version()), ("python", platform.python_version())]
        keep = verified.CURVE_NAMES if self.device == "cpu" else ()  # the curves are the seeded CPU run
        run = snippets.run_snippet(self.entry, self.device, keep_globals=keep)
        self.user_properties.append(("seconds", round(run.seconds, 2)))
        if not run.passed:
            raise SnippetFailed(run)
        problems = snippets.figure_problems(self.entry, run.stdout)  # claims hold on every device
        if problems:
            raise FiguresDrifted(run, problems)
        curves = verified.curves_from(run.kept)
        if curves:
            verified.write_curves(verified.record_dir(self.entry_kb_root), self.entry.id, curves, sha, torch_version())
        retried = ", retried once after the exit abort" if run.exit_aborts else \
            ", retried once after the ranks deadlocked" if run.deadlocks else ""
        print(f"{self.name}: {run.summary()} ({run.seconds:.1f}s{retried})")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, FiguresDrifted):
            run = excinfo.value.run
            line = run.entry.lines.get("figures", run.entry.snippet_line)
            return "\n".join(f"{run.entry.path}:{line}: {p}" for p in excinfo.value.problems) \
                + f"\n--- stdout ---\n{run.stdout[-2000:]}"
        if not isinstance(excinfo.value, SnippetFailed):
            return super().repr_failure(excinfo, style)
        run = excinfo.value.run
        line = snippets.failing_line(run) or run.entry.snippet_line
        what = f"deadlocked: its processes used almost no CPU for {snippets.IDLE_LIMIT:.0f}s" if run.deadlocked else \
            f"timed out after {run.seconds:.0f}s" if run.timed_out else f"exited {run.returncode}"
        tail = "\n".join((run.stderr or "").strip().splitlines()[-25:])
        return f"{run.entry.path}:{line}: snippet {what} on {run.device}\n{tail}\n--- stdout ---\n{run.stdout[-2000:]}"

    def reportinfo(self):
        return os.path.join(self.entry_kb_root, "entries"), 0, self.name


class SnippetSuite(pytest.File):
    def collect(self):
        root = find_kb_root()
        for entry_id in entry_ids(root):
            for device in snippets.DEVICES:
                yield SnippetItem.from_parent(self, name=f"{entry_id}[{device}]", entry_id=entry_id, device=device,
                                              kb_root=root)


def torch_version() -> str:
    import torch
    return str(torch.__version__)  # a str subclass that xdist cannot send


def device_name(device: str) -> str:
    """The record's key: "cpu", or the CUDA device's own name (one record per kind of GPU)."""
    if device == "cpu":
        return "cpu"
    import torch
    return torch.cuda.get_device_name(0)
