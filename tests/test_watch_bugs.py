"""tests/watch/bugs/MANIFEST.yaml: real silent training bugs from public threads, each reproduced as a
script in our own code. This validates the manifest only (no script is run here): every item names an
existing script, an http(s) thread, a KB entry, a split decided by the URL hash, and the frozen date of
a test item; no thread sits in both splits."""
from __future__ import annotations

import ast
import hashlib
import os

import yaml

from kb_tools.core.load import load_kb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUGS = os.path.join(ROOT, "tests", "watch", "bugs")
FIELDS = {"file", "url", "thread_title", "confirmed_cause", "entry", "split", "shape"}


def manifest() -> list:
    with open(os.path.join(BUGS, "MANIFEST.yaml"), encoding="utf-8") as f:
        items = yaml.safe_load(f)
    assert isinstance(items, list) and items, "MANIFEST.yaml must be a non-empty list"
    return items


def split_of(url: str) -> str:
    """The rule fixed in README.md before any kb watch run: the URL's sha256, last hex digit."""
    return "dev" if int(hashlib.sha256(url.encode()).hexdigest()[-1], 16) < 10 else "test"


def test_every_item_has_the_fields_and_an_existing_script():
    for item in manifest():
        missing = FIELDS - set(item)
        assert not missing, f"{item.get('file')}: missing {sorted(missing)}"
        for field in FIELDS:
            assert isinstance(item[field], str) and item[field].strip(), f"{item['file']}: empty {field}"
        path = os.path.join(BUGS, item["file"])
        assert os.path.isfile(path), f"{item['file']} does not exist"
        assert item["file"].startswith(item["split"] + "/"), f"{item['file']} is not under {item['split']}/"


def test_urls_are_http_and_named_in_the_script_docstring():
    for item in manifest():
        url = item["url"]
        assert url.startswith(("https://", "http://")), f"{item['file']}: {url} is not http(s)"
        with open(os.path.join(BUGS, item["file"]), encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
        assert url in doc, f"{item['file']}: its docstring must give the thread URL"


def test_entries_exist_in_the_kb():
    kb = load_kb(os.path.join(ROOT, "kb"))
    for item in manifest():
        assert item["entry"] in kb.entries, f"{item['file']}: '{item['entry']}' is no KB entry"


def test_splits_follow_the_url_rule_and_test_items_are_frozen():
    items = manifest()
    for item in items:
        assert item["split"] in {"dev", "test"}, f"{item['file']}: split {item['split']!r}"
        assert item["split"] == split_of(item["url"]), f"{item['file']}: split differs from the URL rule"
        if item["split"] == "test":
            assert str(item.get("frozen_since", "")).strip(), f"{item['file']}: a test item needs frozen_since"
    assert {i["split"] for i in items} == {"dev", "test"}


def test_no_thread_in_both_splits_and_no_duplicate_file():
    items = manifest()
    splits: dict = {}
    for item in items:
        splits.setdefault(item["url"].rstrip("/"), set()).add(item["split"])
    both = [url for url, s in splits.items() if len(s) > 1]
    assert not both, f"threads in both splits: {both}"
    files = [item["file"] for item in items]
    assert len(files) == len(set(files)), "a script is listed twice"


def test_every_script_on_disk_is_listed():
    listed = {item["file"] for item in manifest()}
    on_disk = {f"{split}/{name}" for split in ("dev", "test")
               for name in os.listdir(os.path.join(BUGS, split)) if name.endswith(".py")}
    assert on_disk == listed, f"not listed: {sorted(on_disk - listed)}; missing: {sorted(listed - on_disk)}"
