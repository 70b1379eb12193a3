"""Property-based: random YAML at the loader, random bytes in the caches, random HTTP replies at the
fetcher. Whatever comes, the answer is a result or one-line problems/errors, never a traceback or a
hang, and the KB's files are left as they were."""
from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import socketserver
import threading
import time

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kb_tools.core import load  # noqa: E402
from kb_tools.verify.evidence import EvidenceError, add_evidence  # noqa: E402
from kb_tools.search.index import load_index  # noqa: E402
from kb_tools.search.rank import search  # noqa: E402
from kbfactory import HANG_S, entry, make_kb  # noqa: E402

FAST = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def digest(top) -> dict:
    """Every file under `top` (but the cache) and its sha256: the KB is unchanged iff this is."""
    out = {}
    for dirpath, _, files in os.walk(top):
        if "cache" in dirpath.split(os.sep):
            continue
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, top)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def kb_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    make_kb(root)
    return root


# ---------------------------------------------------------------- YAML at the loader

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                    st.text(max_size=40), st.dates(), st.binary(max_size=20),
                    st.datetimes(min_value=datetime.datetime(1900, 1, 1)))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
fields = st.sampled_from(sorted(load.ENTRY_FIELDS) + ["symptomz", "__line__", "1"])


@st.composite
def entry_texts(draw):
    kind = draw(st.sampled_from(["mutated", "raw", "tokens"]))
    if kind == "mutated":  # a valid entry with some fields replaced by anything
        data = entry("fuzz-entry")
        for field in draw(st.lists(fields, max_size=3)):
            data[field] = draw(values)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=draw(st.booleans()))
    if kind == "tokens":  # YAML syntax glued at random: anchors, aliases, tags, flows, tabs
        pieces = ["id: fuzz-entry\n", "title: ", "&a ", "*a ", "*b ", "!!binary ", "!!python/object ",
                  "[", "]", "{", "}", ", ", ": ", "- ", "\n", "\t", "  ", "'", '"', "|\n  ", ">-\n  ",
                  "2020-01-01", "<<: *a\n", "? ", "#", "\x00", "\u009f", "\ufeff", "%YAML 1.1\n", "---\n"]
        return "".join(draw(st.lists(st.sampled_from(pieces), max_size=30)))
    return draw(st.text(max_size=200))


@FAST
@given(text=entry_texts())
def test_random_yaml_gives_one_line_problems_and_a_working_search(kb_root, tmp_path, monkeypatch, text):
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    path = kb_root / "kb" / "entries" / "loss" / "fuzz-entry.yaml"
    path.write_bytes(text.encode("utf-8", errors="replace"))  # st.text may hold lone surrogates
    before = digest(kb_root)
    try:
        kb = load.load_kb(str(kb_root / "kb"))
        for problem in kb.problems:
            line = str(problem)
            assert "\n" not in line and line.startswith("kb/"), line
        index = load_index(str(kb_root / "kb"))
        assert [h.id for h in search(index, "loss flat", limit=1)] == ["alpha-bug"]
        assert load.load_kb(str(kb_root / "kb")).entries.keys() == kb.entries.keys()  # from the cache
        assert digest(kb_root) == before
    finally:
        path.unlink()


# ---------------------------------------------------------------- bytes in the caches

@FAST
@given(how=st.sampled_from(["random", "truncate", "flip", "splice"]), data=st.data())
def test_random_cache_bytes_cost_a_rebuild_never_a_wrong_answer(kb_root, tmp_path, monkeypatch, how, data):
    cache = tmp_path / "cache"
    shutil.rmtree(cache, ignore_errors=True)  # tmp_path is shared by the examples
    monkeypatch.setenv("KB_CACHE_DIR", str(cache))
    kb_dir = str(kb_root / "kb")
    fresh = load.load_kb(kb_dir, use_cache=False)
    load.load_kb(kb_dir)
    load_index(kb_dir)
    before = digest(kb_root)
    for path in sorted(cache.iterdir()):
        real = path.read_bytes()
        if how == "random":
            damaged = data.draw(st.binary(max_size=300))
        elif how == "truncate":
            damaged = real[:data.draw(st.integers(0, 2**31)) % len(real)]
        elif how == "flip":  # positions drawn independently of the file's length, which may vary
            at = data.draw(st.integers(0, 2**31)) % len(real)
            damaged = real[:at] + bytes([real[at] ^ data.draw(st.integers(1, 255))]) + real[at + 1:]
        else:  # a valid header in front of random bytes
            damaged = real[:data.draw(st.integers(0, 64))] + data.draw(st.binary(max_size=200))
        path.write_bytes(damaged)
    kb = load.load_kb(kb_dir)
    assert kb.entries == fresh.entries and kb.quotes == fresh.quotes and kb.sources == fresh.sources
    hits = search(load_index(kb_dir), "nan gradient explodes", limit=2)
    assert hits[0].id == "beta-bug" and hits[0].title == "Title of beta-bug"
    assert digest(kb_root) == before


# ---------------------------------------------------------------- HTTP replies at the fetcher

REPLY = {"bytes": b"", "drip": False}


class RawHandler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.settimeout(5)
        got = b""
        try:
            while b"\r\n\r\n" not in got and len(got) < 65536:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                got += chunk
            if REPLY["drip"]:
                for i in range(0, len(REPLY["bytes"]), 3):
                    self.request.sendall(REPLY["bytes"][i:i + 3])
                    time.sleep(0.05)
            else:
                self.request.sendall(REPLY["bytes"])
        except OSError:
            pass


@pytest.fixture(scope="module")
def raw_server():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), RawHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


header_lines = st.sampled_from([
    b"Content-Type: text/html; charset=utf-8", b"Content-Type: text/plain", b"Content-Type: text/html; charset=latin-1",
    b"Content-Type: text/html; charset=no-such-charset", b"Content-Type: application/pdf", b"Content-Type: ",
    b"Content-Encoding: gzip", b"Content-Encoding: br", b"Content-Encoding: deflate",
    b"Content-Length: 5", b"Content-Length: 99999999", b"Content-Length: -1", b"Content-Length: x",
    b"Transfer-Encoding: chunked", b"Location: /again", b"Location: ftp://x/", b"Location: http://[::1",
    b"Location: http://127.0.0.1:1/", b"X-\x9f: \x00", b"no colon here",
])
bodies = st.one_of(st.binary(max_size=300), st.just(b"<html><title>T\xc2\x9f</title><p>words here</p></html>"),
                   st.just(b"\x1f\x8b\x08\x00garbage"), st.just(b"5\r\nhello\r\n0\r\n\r\n"))


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(status=st.sampled_from([b"200 OK", b"301 Moved", b"302 Found", b"404 Not Found", b"500 Oops",
                               b"999 What", b"abc", b""]),
       headers=st.lists(header_lines, max_size=5), body=bodies, drip=st.booleans(),
       version=st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/9", b"SSH-2.0"]))
def test_random_http_replies_give_a_page_or_one_line(kb_root, raw_server, status, headers, body, drip, version):
    REPLY["bytes"] = version + b" " + status + b"\r\n" + b"\r\n".join(headers) + b"\r\n\r\n" + body
    REPLY["drip"] = drip
    evidence = kb_root / "evidence"
    before = digest(kb_root)
    start = time.monotonic()
    try:
        result = add_evidence(raw_server + "/page", "fuzzed", str(evidence), timeout=1.0, max_bytes=100_000)
    except EvidenceError as exc:
        message = str(exc)
        assert message and "\n" not in message and "\r" not in message, message
        assert digest(kb_root) == before
    else:
        try:
            kb = load.load_kb(str(kb_root / "kb"), use_cache=False)
            assert [str(p) for p in kb.problems] == [] and "fuzzed" in kb.sources, result
        finally:
            os.remove(result["path"])
    assert time.monotonic() - start < HANG_S
