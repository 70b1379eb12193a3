"""Collect tests/test_snippets.py as one item per (entry, device) and record the outcomes in
build/verified/ (or in $KB_RECORD_DIR: `make record` points it at the committed kb/verified; see
kb_tools/snippets/verified.py), keep the suite's caches out of the user's own cache folder, and fail the
run if it changed the checkout: a test never rewrites a tracked file."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time

import pytest
from treeguard import git_status

# The suite builds hundreds of throw-away KBs, each with its own cache files: they go to one folder
# of the run's (shared with xdist's workers, which inherit the variable), removed when the run ends,
# never to ~/.cache/kb-tools. Tests that test the cache set KB_CACHE_DIR themselves.
SUITE_CACHE = "KB_TESTS_CACHE_DIR"
if SUITE_CACHE not in os.environ:
    os.environ[SUITE_CACHE] = tempfile.mkdtemp(prefix="kb-tests-cache-")
os.environ["KB_CACHE_DIR"] = os.environ[SUITE_CACHE]
# Two xdist workers already keep both cores busy: numpy's BLAS threads (the MiniLM tests) would only
# spin against the other worker. Set before numpy is first imported; a value the caller set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

@pytest.fixture(scope="session")
def shipped_kb():
    """The shipped KB, parsed once per session (per xdist worker), never at collection."""
    from kb_tools.core.load import load_kb
    kb = load_kb(use_cache=False)
    assert not kb.problems, "\n".join(map(str, kb.problems))
    return kb


@pytest.fixture(scope="session")
def shipped_index(shipped_kb):
    """The search index of the shipped KB, with the vectors `kb search` uses, built once per session."""
    from kb_tools.search.index import build_index
    return build_index(shipped_kb)


_RUNS = {}
_ITEM_NAME = re.compile(r"::([a-z0-9-]+)\[(cpu|cuda)\](?:@[\w-]+)?$")  # an xdist group may follow


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


_TREE_BEFORE = []


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):
        _TREE_BEFORE.append(git_status())


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return
    if _RUNS:
        from kb_tools.snippets import verified
        from kb_tools.core.locate import find_kb_root
        verified.record(_RUNS, verified.record_dir(find_kb_root()))
    shutil.rmtree(os.environ.pop(SUITE_CACHE), ignore_errors=True)
    before, after = (_TREE_BEFORE or [None])[0], git_status()
    recording = os.environ.get("KB_RECORD_DIR")  # `make record` writes kb/verified on purpose
    if before is not None and after is not None and before != after and not recording:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            "the test run changed the checkout (a test must never rewrite tracked files):\n  "
            + "\n  ".join(changed[:20]), red=True)
        session.exitstatus = 1
