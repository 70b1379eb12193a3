"""Every entry's snippet, run for real on each device: one test per (entry, device).

Collected by conftest.py's hook as items named like `double-softmax[cpu]`; a
failure is reported at the YAML line that holds the failing snippet line.
"""
from __future__ import annotations

import json
import os

import pytest

from kb_tools import snippets
from kb_tools.load import load_kb
from kb_tools.util import write_atomic

RESULTS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "artifacts", "snippet-results.json")


class SnippetFailed(Exception):
    def __init__(self, run):
        self.run = run


class FiguresDrifted(Exception):
    def __init__(self, run, problems):
        self.run, self.problems = run, problems


class SnippetItem(pytest.Item):
    def __init__(self, *, entry, device, **kwargs):
        super().__init__(**kwargs)
        self.entry, self.device = entry, device

    def runtest(self):
        reason = snippets.device_skip_reason(self.entry, self.device)
        if reason:
            pytest.skip(reason)
        run = snippets.run_snippet(self.entry, self.device)
        self.user_properties.append(("seconds", round(run.seconds, 2)))
        if not run.passed:
            raise SnippetFailed(run)
        if self.device == "cpu":  # the figures are the seeded CPU values; CUDA kernels may differ
            problems = snippets.figure_problems(self.entry, run.stdout)
            if problems:
                raise FiguresDrifted(run, problems)
        print(f"{self.name}: {run.summary()} ({run.seconds:.1f}s)")

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
        what = f"timed out after {run.seconds:.0f}s" if run.timed_out else f"exited {run.returncode}"
        tail = "\n".join((run.stderr or "").strip().splitlines()[-25:])
        return f"{run.entry.path}:{line}: snippet {what} on {run.device}\n{tail}\n--- stdout ---\n{run.stdout[-2000:]}"

    def reportinfo(self):
        return self.entry.path, self.entry.snippet_line - 1, self.name


class SnippetSuite(pytest.File):
    def collect(self):
        kb = load_kb(use_cache=False)
        assert not kb.problems, "\n".join(map(str, kb.problems))
        for entry in kb.entries.values():
            for device in snippets.DEVICES:
                yield SnippetItem.from_parent(self, name=f"{entry.id}[{device}]", entry=entry, device=device)


def write_results(outcomes: dict, path: str | None = None) -> None:
    """Record which devices each snippet passed on, for the docs site (atomic write).

    A run of a subset (`-k dead-relu`) updates its own entries and keeps the others' earlier
    outcomes, as long as they were recorded with the same torch and Python.
    """
    import platform
    import torch

    path = path or RESULTS_FILE
    versions = {"torch": torch.__version__, "python": platform.python_version()}
    results = {}
    try:
        with open(path, encoding="utf-8") as fh:
            earlier = json.load(fh)
        if all(earlier.get(k) == v for k, v in versions.items()) and isinstance(earlier.get("results"), dict):
            results = {k: dict(v) for k, v in earlier["results"].items() if isinstance(v, dict)}
    except (OSError, ValueError, AttributeError):
        pass  # no earlier run, or not a results file: start afresh
    for (entry_id, device), outcome in sorted(outcomes.items()):
        results.setdefault(entry_id, {})[device] = outcome
    results = dict(sorted(results.items()))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, json.dumps({**versions, "results": results}, indent=1))
