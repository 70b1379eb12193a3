"""tests/lint/bugs/MANIFEST.yaml: real reported bugs from public threads, in the users' code shapes,
for measuring kb lint. This validates the manifest (no figure is asserted here: bench/lint_quality.py
measures): every item names an existing case that parses, an http(s) thread given in the case's
docstring, a KB entry that a lint rule covers, the split its URL gives, the frozen date of a test
item; no thread appears twice."""
from __future__ import annotations

import ast
import hashlib
import os

import yaml

from kb_tools.core.load import load_kb
from kb_tools.lint.engine import RULES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = {"file", "url", "thread_title", "confirmed_cause", "entry", "split", "shape"}


def manifest() -> list:
    with open(os.path.join(ROOT, "tests", "lint", "bugs", "MANIFEST.yaml"), encoding="utf-8") as f:
        items = yaml.safe_load(f)
    assert isinstance(items, list) and items, "MANIFEST.yaml must be a non-empty list"
    return items


def test_items_name_a_parsing_case_whose_docstring_gives_the_thread():
    for item in manifest():
        missing = FIELDS - set(item)
        assert not missing, f"{item.get('file')}: missing {sorted(missing)}"
        path = os.path.join(ROOT, item["file"])
        assert os.path.isfile(path), f"{item['file']} does not exist"
        assert item["url"].startswith(("https://", "http://")), item["url"]
        with open(path, encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
        assert item["url"] in doc, f"{item['file']}: its docstring must give the thread URL"


def test_entries_exist_and_a_rule_covers_each():
    kb = load_kb(os.path.join(ROOT, "kb"))
    covered = {entry for _, entry, _ in RULES.values()}
    for item in manifest():
        assert item["entry"] in kb.entries, f"{item['file']}: '{item['entry']}' is no KB entry"
        assert item["entry"] in covered, f"{item['file']}: no lint rule points at '{item['entry']}'"


def test_splits_follow_the_url_rule_test_items_are_frozen_and_threads_are_unique():
    items = manifest()
    urls = [i["url"] for i in items]
    assert len(urls) == len(set(urls)), "a thread is listed twice"
    for item in items:
        split = "dev" if int(hashlib.sha256(item["url"].encode()).hexdigest()[-1], 16) < 10 else "test"
        assert item["split"] == split, f"{item['file']}: the URL rule gives {split}"
        assert f"/{split}/" in item["file"], f"{item['file']} is not under {split}/"
        if split == "test":
            assert str(item.get("frozen_since", "")).strip(), f"{item['file']}: a test item needs frozen_since"
