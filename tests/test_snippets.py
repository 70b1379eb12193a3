"""Every entry's snippet, run for real on each device: one test per (entry, device).

Collected by conftest.py's hook as items named like `double-softmax[cpu]`; a
failure is reported at the YAML line that holds the failing snippet line.
"""
from __future__ import annotations

import json
import os

import pytest

from kb_tools import snippets
from kb_tools.load import load_kb, write_atomic

RESULTS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "artifacts", "snippet-results.json")


class SnippetFailed(Exception):
    def __init__(self, run):
        self.run = run


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
        print(f"{self.name}: {run.summary()} ({run.seconds:.1f}s)")

    def repr_failure(self, excinfo, style=None):
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


def write_results(outcomes: dict) -> None:
    """Record which devices each snippet passed on, for the docs site (atomic write).

    Merged into the results already recorded with the same torch: running one
    entry's test (`pytest tests/test_snippets.py -k double-softmax`) updates that
    entry and keeps every other entry's last outcome."""
    import platform
    import torch

    results = {}
    try:
        with open(RESULTS_FILE, encoding="utf-8") as fh:
            old = json.load(fh)
        if isinstance(old, dict) and old.get("torch") == torch.__version__ and isinstance(old.get("results"), dict):
            results = {k: dict(v) for k, v in old["results"].items() if isinstance(v, dict)}
    except (OSError, ValueError):
        pass  # none yet, or unreadable: start afresh
    for (entry_id, device), outcome in sorted(outcomes.items()):
        results.setdefault(entry_id, {})[device] = outcome
    os.makedirs(os.path.dirname(RESULTS_FILE), exist_ok=True)
    write_atomic(RESULTS_FILE, json.dumps({"torch": torch.__version__, "python": platform.python_version(),
                                           "results": dict(sorted(results.items()))}, indent=1))
