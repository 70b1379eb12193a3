"""Search quality floor: an entry is found by the very words it lists as symptoms."""
from __future__ import annotations

import pytest

from kb_tools.load import load_kb
from kb_tools.search import search

KB = load_kb(use_cache=False)


@pytest.mark.parametrize("entry_id", list(KB.entries))
def test_each_symptom_ranks_its_entry_in_top_3(entry_id):
    misses = []
    for symptom in KB.entries[entry_id].symptoms:
        ranked = [h.entry.id for h in search(KB, symptom, limit=3)]
        if entry_id not in ranked:
            misses.append(f"{symptom!r} -> {ranked}")
    assert not misses, "\n".join(misses)
