"""Every KB entry is named by some check of `kb watch` or listed in kb_tools/watch/undetectable.py
with a reason, and never both: a new check removes its entry from the list."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_entry_is_covered_by_a_check_or_listed_with_a_reason_and_not_both():
    from kb_tools.core.load import load_kb
    from kb_tools.watch import undetectable
    from kb_tools.watch.checks import all_checks
    entries = set(load_kb(os.path.join(ROOT, "kb")).entries)
    covered = {e for check in all_checks() for e in (check.entry, *check.also)}
    assert not set(undetectable.UNDETECTABLE) & set(undetectable.NO_CHECK_YET)
    listed = undetectable.listed()
    assert all(isinstance(reason, str) and reason.strip() for reason in listed.values())
    assert sorted(set(listed) - entries) == [], "listed ids that are no entry"
    assert sorted(covered & set(listed)) == [], "entries a check names: remove them from undetectable.py"
    assert sorted(entries - covered - set(listed)) == [], "entries neither covered by a check nor listed"
