"""Caches that cannot lie: a damaged, swapped or hostile cache file costs one rebuild, never a
traceback, a hang or a wrong answer."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from kb_tools.core import cache
from kb_tools.core import load
from kb_tools.core import locate
from kb_tools.core import util
from kb_tools.search.index import load_index
from kb_tools.search.rank import search
from kbfactory import make_kb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def kb_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    return str(make_kb(tmp_path))


def cache_files(tmp_path):
    return {p.name.split(".")[1]: p for p in (tmp_path / "cache").iterdir()}


def top_title(kb_dir):
    index = load_index(kb_dir)
    return search(index, "loss flat", limit=1)[0].title


def damage(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "flipped":
        at = data.index(b"Title of alpha-bug") + len("Title of ")
        path.write_bytes(data[:at] + b"X" + data[at + 1:])  # same length, one byte changed
    elif how == "appended":
        path.write_bytes(data + b"\0")
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))


@pytest.mark.parametrize("how", ["truncated", "empty", "flipped", "appended", "garbage"])
@pytest.mark.parametrize("name", ["search-index", "kb"])
def test_a_damaged_cache_is_rebuilt_not_trusted(kb_dir, tmp_path, name, how):
    assert top_title(kb_dir) == "Title of alpha-bug"
    assert load.load_kb(kb_dir).entries["alpha-bug"].title == "Title of alpha-bug"
    path = cache_files(tmp_path)[name]
    damage(path, how)
    assert load.load_kb(kb_dir).entries["alpha-bug"].title == "Title of alpha-bug"
    assert top_title(kb_dir) == "Title of alpha-bug"
    assert cache.read_sealed(str(path)) is not None  # rewritten whole


def test_damaged_index_through_the_command_line(kb_dir, tmp_path):
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "kb_tools", "--kb", kb_dir, "search", "loss flat", "--json"]
    assert subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT).returncode == 0
    damage(cache_files(tmp_path)["search-index"], "truncated")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0 and r.stderr == "" and '"alpha-bug"' in r.stdout


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_a_cache_path_that_is_not_a_file_neither_hangs_nor_breaks(kb_dir, tmp_path, kind):
    top_title(kb_dir)
    paths = cache_files(tmp_path)
    for path in paths.values():
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        else:
            path.mkdir()
    result = {}
    worker = threading.Thread(target=lambda: result.update(
        title=top_title(kb_dir), kb=load.load_kb(kb_dir).entries["alpha-bug"].title), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "reading the cache hung"
    assert result == {"title": "Title of alpha-bug", "kb": "Title of alpha-bug"}


def test_truncating_the_index_while_it_is_open_is_harmless(kb_dir, tmp_path):
    index = load_index(kb_dir)  # held open, as a long-lived process would
    path = cache_files(tmp_path)["search-index"]
    with open(path, "r+b") as fh:
        fh.truncate(16)  # in place, not replaced: a mapped file would now raise SIGBUS on access
    assert search(index, "loss flat", limit=1)[0].id == "alpha-bug"
    assert search(index, "nan gradient explodes", limit=1)[0].id == "beta-bug"


def test_read_regular_caps_size_and_refuses_special_files(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert util.read_regular(str(path), 100) == b"x" * 100
    with pytest.raises(ValueError, match="limit"):
        util.read_regular(str(path), 99)
    with pytest.raises(OSError):
        util.read_regular("/dev/zero", 10)
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(OSError):
        util.read_regular(str(tmp_path / "pipe"), 10)


def test_seal_round_trip_and_every_single_byte_change_is_caught(tmp_path):
    payload = b"KBT2" + bytes(range(256)) * 3
    path = tmp_path / "c"
    path.write_bytes(cache.seal(payload))
    assert bytes(cache.read_sealed(str(path))) == payload
    sealed = cache.seal(payload)
    for at in range(0, len(sealed), 7):
        changed = sealed[:at] + bytes([sealed[at] ^ 0x20]) + sealed[at + 1:]
        path.write_bytes(changed)
        assert cache.read_sealed(str(path)) is None, at
    path.write_bytes(sealed)
    assert cache.read_sealed(str(path), prefix=b"KBT1") is None  # another key: stale


def test_exclusive_write_lets_exactly_one_of_racing_writers_win(tmp_path):
    target = str(tmp_path / "one.md")
    wins, losses = [], []

    def attempt(n):
        try:
            util.write_atomic(target, f"writer {n}\n" * 1000, exclusive=True)
            wins.append(n)
        except FileExistsError:
            losses.append(n)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7
    assert open(target).read() == f"writer {wins[0]}\n" * 1000
    assert os.listdir(tmp_path) == ["one.md"]  # no temporary file left behind


def test_a_table_key_is_the_same_bytes_whoever_else_holds_its_signature(kb_dir):
    """The key is compared as bytes; marshal's newer formats write other bytes for an equal
    signature once something else references its parts, which would rebuild for nothing."""
    signature = locate.kb_signature(locate.find_kb_root(kb_dir))
    before = cache.table_key(1, signature)
    held = [part for item in signature if isinstance(item, tuple) for part in item]
    assert held and cache.table_key(1, signature) == before


def test_per_kb_cache_files_unwritten_for_a_month_are_pruned_on_the_next_write(kb_dir, tmp_path):
    """A deleted checkout's cache files go; the live KB's, other files and young files stay."""
    import time
    folder = tmp_path / "cache"
    folder.mkdir()
    old = time.time() - (cache.STALE_DAYS + 1) * 86400
    gone = folder / "0123456789abcdef.kb.marshal"
    gone_index = folder / "0123456789abcdef.search-index.marshal"
    young = folder / "fedcba9876543210.kb.marshal"
    vectors = folder / "minilm-l6.vectors.marshal"  # an embedder's cache, not a KB's
    other = folder / "notes.txt"
    for path in (gone, gone_index, young, vectors, other):
        path.write_bytes(b"x")
    for path in (gone, gone_index, vectors, other):
        os.utime(path, (old, old))
    (folder / "0000000000000000.kb.marshal").mkdir()  # not a regular file: left alone
    os.utime(folder / "0000000000000000.kb.marshal", (old, old))

    assert top_title(kb_dir) == "Title of alpha-bug"  # a miss: writes, then prunes
    names = {p.name for p in folder.iterdir()}
    assert gone.name not in names and gone_index.name not in names
    assert {young.name, vectors.name, other.name, "0000000000000000.kb.marshal"} <= names
    assert set(cache_files(tmp_path)) >= {"kb", "search-index"}  # the live KB's own files
    assert top_title(kb_dir) == "Title of alpha-bug"


def test_prune_of_a_missing_folder_removes_nothing(tmp_path):
    assert cache.prune(str(tmp_path / "absent")) == 0


def plant(path, kind, tmp_path):
    """A directory entry the loader must never open: a dangling link, a FIFO, a linked folder."""
    if kind == "dangling-link":
        path.symlink_to(tmp_path / "nowhere.yaml")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        (tmp_path / "elsewhere").mkdir(exist_ok=True)
        path.symlink_to(tmp_path / "elsewhere")


def problems_within(kb_dir, seconds=20):
    """load_kb's problems, from the cache when it is warm, in a thread that must finish: opening a
    FIFO would block for ever."""
    out = {}
    worker = threading.Thread(target=lambda: out.update(p=[str(p) for p in load.load_kb(kb_dir).problems]),
                              daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the loader hung"
    return out["p"]


@pytest.mark.parametrize("kind", ["dangling-link", "fifo", "linked-folder"])
def test_a_non_regular_entry_added_to_or_removed_from_a_warm_kb_is_seen(kb_dir, tmp_path, kind):
    """The signature covers every entry of the KB's folders, not only its regular files: the
    cache is never served after such an entry comes or goes."""
    assert problems_within(kb_dir) == []  # cold, then warm
    assert problems_within(kb_dir) == []
    path = tmp_path / "kb" / "entries" / "loss" / ("linked" if kind == "linked-folder" else "odd.yaml")
    plant(path, kind, tmp_path)
    problems = problems_within(kb_dir)
    assert len(problems) == 1 and os.path.join("entries", "loss", path.name) in problems[0], problems
    assert problems_within(kb_dir) == problems  # warm: the same report
    path.unlink()
    assert problems_within(kb_dir) == []


def test_the_signature_changes_with_a_link_target_a_type_or_a_name(kb_dir, tmp_path):
    root = locate.find_kb_root(kb_dir)
    link = tmp_path / "kb" / "entries" / "loss" / "gone.yaml"
    link.symlink_to(tmp_path / "one.yaml")
    seen = [locate.kb_signature(root)]
    link.unlink()
    link.symlink_to(tmp_path / "two.yaml")  # another target, still dangling
    seen.append(locate.kb_signature(root))
    link.unlink()
    os.mkfifo(link)  # same name, another type
    seen.append(locate.kb_signature(root))
    link.unlink()
    (tmp_path / "kb" / "entries" / "loss" / "README").write_text("not an entry\n")  # a name the loader skips
    seen.append(locate.kb_signature(root))
    assert len(set(seen)) == len(seen)


def test_check_and_search_forget_a_removed_dangling_link(kb_dir, tmp_path):
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KB_PATH", None)
    run = lambda *a: subprocess.run([sys.executable, "-m", "kb_tools", "--kb", kb_dir, *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    link = tmp_path / "kb" / "entries" / "loss" / "gone.yaml"
    link.symlink_to(tmp_path / "nowhere.yaml")
    assert "gone.yaml" in run("check").stdout + run("check").stderr
    assert "gone.yaml" in run("search", "loss flat").stderr
    link.unlink()
    check, found = run("check"), run("search", "loss flat")
    assert check.returncode == 0 and "gone.yaml" not in check.stdout + check.stderr, check
    assert found.returncode == 0 and "alpha-bug" in found.stdout, found


def test_a_record_cached_without_a_field_is_rebuilt_not_served_as_none(kb_dir):
    """A cache written before a field existed lacks it: the record is refused and the KB parsed
    again, so the field has its real value (a forgotten version bump cannot serve None)."""
    fresh = load.load_kb(kb_dir)  # writes the cache
    path = cache.path_for(kb_dir, "kb")
    signature = locate.kb_signature(kb_dir)
    plain = cache.read_value(path, signature)
    assert plain is not None
    for record in plain["entries"]:
        record.pop("figures")
    cache.write_value(path, signature, plain)
    with pytest.raises(TypeError, match="missing fields"):
        load._from_plain(kb_dir, plain)
    again = load.load_kb(kb_dir)
    assert all(e.figures == fresh.entries[e.id].figures and e.figures is not None for e in again.entries.values())


def test_an_edit_to_the_schema_or_the_index_code_changes_their_cache_keys(tmp_path, monkeypatch, kb_dir):
    """The keys hold a stamp of the modules that shape the cached data: editing one rebuilds."""
    from kb_tools.search import index as search_index
    fake = tmp_path / "package"
    for module in locate.SCHEMA_MODULES + search_index.INDEX_MODULES:
        (fake / module).parent.mkdir(parents=True, exist_ok=True)
        (fake / module).write_text("# a module\n")
    monkeypatch.setattr(locate, "PACKAGE_DIR", str(fake))
    kb_before, index_before = locate.kb_signature(kb_dir), search_index.index_version()
    (fake / "core" / "load.py").write_text("# a module, with a new rule\n")
    assert locate.kb_signature(kb_dir) != kb_before and search_index.index_version() == index_before
    (fake / "search" / "tokenize.py").write_text("# another stemming rule\n")
    assert search_index.index_version() != index_before
