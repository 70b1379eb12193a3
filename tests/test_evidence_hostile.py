"""kb evidence add against replies meant to hang, confuse or poison it (a server on 127.0.0.1):
one deadline for the whole request, one-line errors, exclusive creation, honest decoding."""
from __future__ import annotations

import gzip
import http.server
import os
import socketserver
import subprocess
import sys
import threading
import time

import pytest

from kb_tools.verify.evidence import EvidenceError, EvidenceUsage, add_evidence, strip_controls
from kb_tools.core.load import load_kb
from kbfactory import HANG_S, make_kb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STOP = threading.Event()
HTML = "<html><head><title>{title}</title></head><body><p>{body}</p></body></html>"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body: bytes, ctype="text/html", headers=()):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: C901 (one branch per hostile reply)
        path = self.path
        try:
            if path == "/drip-headers":  # a header byte every 0.1 s, never finishing the headers
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not STOP.is_set():
                    self.wfile.write(b"a")
                    self.wfile.flush()
                    time.sleep(0.1)
            elif path.startswith("/hop/"):  # each redirect waits 0.4 s
                left = int(path.rsplit("/", 1)[1])
                time.sleep(0.4)
                self.send_response(302)
                self.send_header("Location", f"/hop/{left - 1}" if left else "/plain")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/loop":
                self.send_response(302)
                self.send_header("Location", "/loop")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/plain":
                self._send(b"plain words for the cache\n", "text/plain; charset=utf-8")
            elif path == "/c1-title":
                self._send(HTML.format(title="Bad\u009f title\u0007", body="Body\u0085 text\u009b here").encode(),
                           "text/html; charset=utf-8")
            elif path == "/gzip":
                self._send(gzip.compress(HTML.format(title="Zipped", body="compressed words").encode()),
                           "text/html; charset=utf-8", [("Content-Encoding", "gzip")])
            elif path == "/gzip-bomb":
                self._send(gzip.compress(b"<p>" + b"a" * 3_000_000 + b"</p>"), "text/html",
                           [("Content-Encoding", "gzip")])
            elif path == "/latin1-declared":
                self._send(HTML.format(title="Caf\xe9", body="na\xefve r\xe9sum\xe9").encode("latin-1"),
                           "text/html; charset=iso-8859-1")
            elif path == "/latin1-undeclared":
                self._send(HTML.format(title="Caf\xe9", body="na\xefve").encode("latin-1"), "text/html")
            elif path == "/bad-utf8":
                self._send(b"<html><body><p>broken \xff\xfe bytes</p></body></html>", "text/html; charset=utf-8")
            elif path == "/brotli":
                self._send(b"\x1b\x03\x00", "text/html", [("Content-Encoding", "br")])
            else:
                self.send_error(404)
        except OSError:
            pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    STOP.set()
    httpd.shutdown()


@pytest.fixture
def ev(tmp_path):
    make_kb(tmp_path)
    return str(tmp_path / "evidence")


@pytest.mark.parametrize("path", ["/drip-headers", "/hop/8"])
def test_the_timeout_bounds_the_whole_request(server, ev, path):
    start = time.monotonic()
    with pytest.raises(EvidenceError, match=r"within 1s \(--timeout\)|longer than 1s") as err:
        add_evidence(server + path, "slow-one", ev, timeout=1)
    assert time.monotonic() - start < HANG_S  # the deadline's own message says it stopped the request
    assert "\n" not in str(err.value) and not os.path.exists(os.path.join(ev, "slow-one.md"))


def test_a_redirect_loop_is_one_line(server, ev):
    with pytest.raises(EvidenceError) as err:
        add_evidence(server + "/loop", "looping", ev, timeout=10)
    assert "redirect loop" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("url, message", [
    ("http://127.0.0.1/a\r\nX-Injected: 1", "control character"),
    ("http://example.org/a b", "space"),
    ("http://[::1", "malformed"),
    ("http://127.0.0.1:99999/", "malformed"),
    ("http:///path-only", "names no host"),
])
def test_malformed_urls_are_usage_errors(ev, url, message):
    with pytest.raises(EvidenceUsage, match=message) as err:
        add_evidence(url, "bad-url", ev)
    assert "\n" not in str(err.value) and "\r" not in str(err.value)


def test_malformed_url_through_the_command_line(tmp_path):
    kb_dir = make_kb(tmp_path)
    r = subprocess.run([sys.executable, "-m", "kb_tools", "--kb", str(kb_dir), "evidence", "add",
                        "http://[::1", "--id", "bad-url"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_concurrent_adds_of_one_id_leave_one_winner(tmp_path, ev):
    results = []
    sources = []
    for n in range(8):
        src = tmp_path / f"notes{n}.txt"
        src.write_text(f"notes from writer {n}\n" * 50)
        sources.append(src)

    def add(n):
        try:
            add_evidence(str(sources[n]), "raced", ev)
            results.append(("ok", n))
        except EvidenceError as exc:
            results.append(("refused", str(exc)))

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    wins = [n for kind, n in results if kind == "ok"]
    assert len(wins) == 1 and len(results) == 8
    assert all("already exists" in msg for kind, msg in results if kind == "refused")
    assert f"notes from writer {wins[0]}" in open(os.path.join(ev, "raced.md")).read()
    assert sorted(os.listdir(ev)) == ["raced.md", "src.md"]


def test_control_characters_are_stripped_and_the_kb_stays_loadable(server, ev, tmp_path):
    add_evidence(server + "/c1-title", "c1-page", ev)
    text = open(os.path.join(ev, "c1-page.md"), encoding="utf-8").read()
    assert "title: Bad title" in text and "Body text here" in text
    assert not any(0x80 <= ord(c) <= 0x9f or (ord(c) < 0x20 and c != "\n") for c in text)
    kb = load_kb(str(tmp_path / "kb"), use_cache=False)
    assert [str(p) for p in kb.problems] == [] and kb.sources["c1-page"].title == "Bad title"


def test_gzip_is_decompressed_and_a_bomb_hits_the_cap(server, ev):
    result = add_evidence(server + "/gzip", "zipped", ev)
    assert result["title"] == "Zipped" and "compressed words" in open(result["path"]).read()
    with pytest.raises(EvidenceError, match="cap once decompressed"):
        add_evidence(server + "/gzip-bomb", "bomb", ev, max_bytes=1_000_000)
    with pytest.raises(EvidenceError, match="not supported"):
        add_evidence(server + "/brotli", "brotli", ev)


@pytest.mark.parametrize("path", ["/latin1-declared", "/latin1-undeclared"])
def test_the_declared_charset_is_used(server, ev, path):
    result = add_evidence(server + path, "latin", ev)
    text = open(result["path"], encoding="utf-8").read()
    assert result["title"] == "Caf\xe9" and "na\xefve" in text and "\ufffd" not in text


def test_undecodable_text_is_refused(server, ev):
    with pytest.raises(EvidenceError, match="does not decode as utf-8"):
        add_evidence(server + "/bad-utf8", "broken", ev)
    assert not os.path.exists(os.path.join(ev, "broken.md"))


def test_strip_controls():
    assert strip_controls("a\u009fb\r\nc\rd\x00\te\ufeff") == "ab\nc\nd\te"
    assert strip_controls(" one \n two\u0085 ", keep_lines=False) == "one two"


class DripTLS(socketserver.BaseRequestHandler):
    """A TLS record header that promises 16 KB, then one byte every 0.1 s: a handshake that never ends."""

    def handle(self):
        try:
            self.request.sendall(b"\x16\x03\x03\x40\x00")
            while not STOP.is_set():
                self.request.sendall(b"\x00")
                time.sleep(0.1)
        except OSError:
            pass


def test_the_deadline_covers_a_dripped_tls_handshake(ev):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), DripTLS)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        start = time.monotonic()
        with pytest.raises(EvidenceError, match=r"within 1s \(--timeout\)"):
            add_evidence(f"https://127.0.0.1:{server.server_address[1]}/", "tls-drip", ev, timeout=1)
        assert time.monotonic() - start < HANG_S
    finally:
        server.shutdown()
        server.server_close()
