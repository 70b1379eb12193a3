"""Collect tests/test_snippets.py as one item per (entry, device) and record the outcomes
in the KB's kb/verified/results.json (see kb_tools/verified.py), and keep the suite's caches
out of the user's own cache folder."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time

# The suite builds hundreds of throw-away KBs, each with its own cache files: they go to one folder
# of the run's (shared with xdist's workers, which inherit the variable), removed when the run ends,
# never to ~/.cache/kb-tools. Tests that test the cache set KB_CACHE_DIR themselves.
SUITE_CACHE = "KB_TESTS_CACHE_DIR"
if SUITE_CACHE not in os.environ:
    os.environ[SUITE_CACHE] = tempfile.mkdtemp(prefix="kb-tests-cache-")
os.environ["KB_CACHE_DIR"] = os.environ[SUITE_CACHE]

_RUNS = {}
_ITEM_NAME = re.compile(r"::([a-z0-9-]+)\[(cpu|cuda)\]$")


def pytest_pycollect_makemodule(module_path, parent):
    if module_path.name == "test_snippets.py":
        from test_snippets import SnippetSuite
        return SnippetSuite.from_parent(parent, path=module_path)
    return None


def pytest_runtest_logreport(report):
    """Under xdist the controller sees every worker's reports: it alone keeps them, so two
    workers never write the record at once and neither loses the other's runs."""
    match = _ITEM_NAME.search(report.nodeid)
    props = dict(report.user_properties)
    if match and report.when == "call" and report.outcome in ("passed", "failed") and "snippet_sha256" in props:
        _RUNS[(match.group(1), props["device_name"])] = {
            "outcome": report.outcome, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "torch": props["torch"], "python": props["python"], "snippet_sha256": props["snippet_sha256"]}


def pytest_sessionfinish(session):
    if _RUNS and not hasattr(session.config, "workerinput"):
        from kb_tools import verified
        from kb_tools.locate import find_kb_root
        verified.record(_RUNS, verified.default_dir(find_kb_root()))
    if not hasattr(session.config, "workerinput"):
        shutil.rmtree(os.environ.pop(SUITE_CACHE), ignore_errors=True)
