"""Collect tests/test_snippets.py as one item per (entry, device) and record the outcomes."""
from __future__ import annotations

import re

_OUTCOMES = {}
_ITEM_NAME = re.compile(r"::([a-z0-9-]+)\[(cpu|cuda)\]$")


def pytest_pycollect_makemodule(module_path, parent):
    if module_path.name == "test_snippets.py":
        from test_snippets import SnippetSuite
        return SnippetSuite.from_parent(parent, path=module_path)
    return None


def pytest_runtest_logreport(report):
    match = _ITEM_NAME.search(report.nodeid)
    if match and (report.when == "call" or report.outcome == "skipped" or report.failed):
        _OUTCOMES[match.groups()] = report.outcome


def pytest_sessionfinish(session):
    if _OUTCOMES and not hasattr(session.config, "workerinput"):
        from test_snippets import write_results
        write_results(_OUTCOMES)
