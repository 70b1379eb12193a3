"""`kb evidence add`: cache a web page or a local file as a source, with provenance.

A cached source is what quotes are checked against, so it must say where it came
from and be reproducible: the front matter records the URL, the retrieval date,
whether the text is the author's own (`kind: primary`) or a retelling, and the
sha256 of the body written below the front matter (what `kb verify` re-checks;
`rehash_sources` records it again after a deliberate edit). Fetching is deliberately narrow: http and https
only (redirects included), one deadline for the whole download, a size cap, and
only HTML or text replies. HTML becomes Markdown with markdownify (on Beautiful
Soup's stdlib parser): every visible sentence is kept, in the same Markdown form
as the rest of evidence/, and `kb verify` ignores the emphasis it adds.
"""
from __future__ import annotations

import datetime
import hashlib
import os
import re

from kb_tools.core.util import KBError, UsageError, did_you_mean, is_kebab_id, write_atomic

MAX_BYTES = 5_000_000
TIMEOUT = 20.0
USER_AGENT = "kb-tools evidence cache (+https://github.com/)"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml", "application/yaml")
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "nav", "form", "button")


class EvidenceError(KBError):
    """The source could not be cached (network, size, type, existing file): exit 1."""


class EvidenceUsage(UsageError, EvidenceError):
    """The request itself is wrong (scheme, id): exit 2."""


# ---------------------------------------------------------------- fetching

class _Deadline:
    """One deadline for a whole request: when it passes, every socket the request opened
    (redirects included) is shut down, so a read blocked on dripped headers or a slow
    body returns at once instead of waiting for the next byte for ever."""

    def __init__(self, seconds: float):
        import threading
        self.expired, self._socks, self._lock = False, [], threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self):
        with self._lock:
            self.expired = True
            for sock in self._socks:
                self._shut(sock)

    @staticmethod
    def _shut(sock):
        import socket
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def register(self, sock):
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                self._shut(sock)

    def cancel(self):
        self._timer.cancel()


def _opener(deadline: _Deadline | None = None):
    import http.client
    import urllib.request

    class SafeRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            if not newurl.lower().startswith(("http://", "https://")) or _url_problem(newurl):
                raise EvidenceError(f"refusing a redirect to {_printable(newurl)}: only http and https URLs "
                                    f"are fetched, and only well-formed ones")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    if deadline is None:
        return urllib.request.build_opener(SafeRedirect)

    def watched(base):
        class Connection(base):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                create = self._create_connection  # the TCP socket, before any TLS handshake on it

                def create_watched(*a, **kw):
                    sock = create(*a, **kw)
                    deadline.register(sock)
                    return sock
                self._create_connection = create_watched
        return Connection

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(watched(http.client.HTTPConnection), req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(watched(http.client.HTTPSConnection), req, context=self._context)

    return urllib.request.build_opener(SafeRedirect, Http, Https)


def _printable(text: str, limit: int = 200) -> str:
    """`text` for a one-line message: control characters escaped, cut at `limit`."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])


def _url_problem(url: str) -> str | None:
    """Why `url` cannot be requested as it is (spaces, control characters, a bad host), or None."""
    import urllib.parse
    if any(ord(c) <= 0x20 or 0x7f <= ord(c) <= 0x9f for c in url):
        return "it holds a space or a control character (CR/LF included)"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError as exc:
        return f"it is malformed ({exc})"
    if not parts.hostname:
        return "it names no host"
    return None


def fetch(url: str, timeout: float = TIMEOUT, max_bytes: int = MAX_BYTES):
    """GET `url` within `timeout` seconds in all and `max_bytes` at most.

    Returns (raw bytes, content type, charset or None, final URL).
    """
    import http.client
    import socket
    import time
    import urllib.error
    import urllib.request
    if not url.lower().startswith(("http://", "https://")):
        raise EvidenceUsage(f"only http and https URLs can be fetched, not {_printable(url.split(':', 1)[0], 20)}:")
    problem = _url_problem(url)
    if problem:
        raise EvidenceUsage(f"{_printable(url)}: not a usable URL: {problem}")
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, headers={
        "User-Agent": USER_AGENT, "Accept": "text/html, text/plain;q=0.9, */*;q=0.1",
        "Accept-Encoding": "gzip, deflate, identity"})
    watch = _Deadline(timeout)
    try:
        return _read_reply(url, request, timeout, max_bytes, deadline, watch)
    except EvidenceError:
        raise
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            raise EvidenceError(f"{_printable(url)}: too many redirects (a redirect loop?), "
                                f"last HTTP {exc.code}") from None
        reason = _printable(str(exc.reason).splitlines()[0] if exc.reason else "")
        raise EvidenceError(f"{_printable(url)}: HTTP {exc.code} {reason}") from None
    except Exception as exc:  # noqa: BLE001 (one line for anything the network throws)
        if watch.expired:
            raise EvidenceError(f"{_printable(url)}: no answer within {timeout:g}s (--timeout)") from None
        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(cause, (socket.timeout, TimeoutError)):
            raise EvidenceError(f"{_printable(url)}: no answer within {timeout:g}s (--timeout)") from None
        if isinstance(exc, (OSError, ValueError, http.client.HTTPException, EOFError)) or isinstance(exc, str):
            raise EvidenceError(f"{_printable(url)}: {_printable(' '.join(str(exc).split()))}") from None
        raise
    finally:
        watch.cancel()


def _read_reply(url, request, timeout, max_bytes, deadline, watch):
    """(body, content type, charset, final URL) of one GET, within the deadline and the cap."""
    import socket
    import time
    with _opener(watch).open(request, timeout=timeout) as resp:
        ctype = resp.headers.get_content_type() if resp.headers.get("Content-Type") else ""
        charset = resp.headers.get_content_charset()
        declared = resp.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise EvidenceError(f"{_printable(url)}: the page is {int(declared):,} bytes, over the {max_bytes:,}-byte cap "
                                f"(--max-bytes)")
        chunks, total = [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EvidenceError(f"{_printable(url)}: download took longer than {timeout:g}s (--timeout)")
            if resp.fp is not None and getattr(resp.fp, "raw", None) is not None:
                try:
                    resp.fp.raw._sock.settimeout(left)  # each wait is bounded by what is left
                except (AttributeError, OSError):
                    pass
            try:
                chunk = resp.read1(65536)
            except (socket.timeout, TimeoutError):
                raise EvidenceError(f"{_printable(url)}: download took longer than {timeout:g}s (--timeout)") from None
            if not chunk:
                if watch.expired:  # the deadline shut the socket: what came is not the whole page
                    raise EvidenceError(f"{_printable(url)}: download took longer than {timeout:g}s (--timeout)")
                break
            total += len(chunk)
            if total > max_bytes:
                raise EvidenceError(f"{_printable(url)}: the page is over the {max_bytes:,}-byte cap (--max-bytes)")
            chunks.append(chunk)
        encoding = (resp.headers.get("Content-Encoding") or "identity").strip().lower()
        return _decompress(b"".join(chunks), encoding, url, max_bytes), ctype, charset, resp.geturl()


def _decompress(raw: bytes, encoding: str, url: str, max_bytes: int) -> bytes:
    """The body with its Content-Encoding undone (gzip, deflate), capped at `max_bytes`."""
    import zlib
    if encoding in ("identity", ""):
        return raw
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise EvidenceError(f"{_printable(url)}: the reply is encoded as {_printable(encoding, 40)}, "
                            f"which is not supported (gzip and deflate are)")
    wbits = 31 if "gzip" in encoding else 15
    try:
        inflater = zlib.decompressobj(wbits)
        body = inflater.decompress(raw, max_bytes + 1)
        if wbits == 15 and not body and raw:  # "deflate" sent raw, without the zlib header
            inflater = zlib.decompressobj(-15)
            body = inflater.decompress(raw, max_bytes + 1)
    except zlib.error as exc:
        raise EvidenceError(f"{_printable(url)}: the {encoding} reply does not decompress ({exc})") from None
    if len(body) > max_bytes or inflater.unconsumed_tail:
        raise EvidenceError(f"{_printable(url)}: the page is over the {max_bytes:,}-byte cap once "
                            f"decompressed (--max-bytes)")
    return body


# ---------------------------------------------------------------- converting

def _looks_like_html(raw: bytes) -> bool:
    head = raw[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head[:256]


def _decode(raw: bytes, charset: str | None, target: str = "the reply") -> str:
    """The text of `raw` in the charset the server (or the page's <meta>) declares; undeclared,
    UTF-8 and then Windows-1252 (HTML's default). Bytes that do not decode are refused, never
    replaced by U+FFFD, and control characters are stripped."""
    if not charset:
        meta = re.search(rb"<meta[^>]+charset=[\"']?([\w-]+)", raw[:4096], re.I)
        charset = meta.group(1).decode("ascii") if meta else None
    tries = [charset] if charset else ["utf-8", "cp1252"]
    for name in tries:
        try:
            return strip_controls(raw.decode(name))
        except LookupError:
            raise EvidenceError(f"{_printable(target)}: unknown charset {_printable(name, 40)!r}") from None
        except UnicodeDecodeError:
            continue
    raise EvidenceError(f"{_printable(target)}: the text does not decode as {' or '.join(tries)}; "
                        f"nothing was written")


_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff\ufff9-\ufffb]")


def strip_controls(text: str, keep_lines: bool = True) -> str:
    """`text` without control characters (C0 but tab and newlines, DEL, C1 such as U+009F, BOM);
    CR LF and lone CR become LF. With keep_lines=False, every run of whitespace becomes a space."""
    text = _CONTROLS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return text if keep_lines else " ".join(text.split())


def html_to_text(html: str) -> tuple:
    """(Markdown text, metadata) of an HTML page: title, author, canonical URL, published date."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter
    soup = BeautifulSoup(html, "html.parser")
    meta = {}
    if soup.title and soup.title.string:
        meta["title"] = " ".join(soup.title.string.split())
    for name, key in (("author", "author"), ("article:published_time", "published"),
                      ("citation_publication_date", "published"), ("og:title", "title")):
        tag = soup.find("meta", attrs={"name": name}) or soup.find("meta", attrs={"property": name})
        content = tag.get("content") if tag else None
        if isinstance(content, str) and content and key not in meta:
            meta[key] = " ".join(content.split())
    canonical = soup.find("link", rel="canonical")
    href = canonical.get("href") if canonical else None
    if isinstance(href, str) and href.startswith(("http://", "https://")):
        meta["url"] = href
    for tag in soup(list(_DROP_TAGS)):
        tag.decompose()
    body = soup.body or soup
    text = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"]).convert_soup(body)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return text, meta


# ---------------------------------------------------------------- writing

def _yaml_value(value: str) -> str:
    import json
    value = str(value)
    plain = re.fullmatch(r"[\w][\w .,/()+-]*", value) and not value.endswith(" ")
    return value if plain and value.lower() not in ("yes", "no", "true", "false", "null", "on", "off") \
        else json.dumps(value, ensure_ascii=False)


def _iso_date(value: str) -> bool:
    """`value` is a calendar date written YYYY-MM-DD (fromisoformat alone also takes 20240101)."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    try:
        datetime.date.fromisoformat(value)
    except ValueError:  # 2024-02-30
        return False
    return True


def add_evidence(target: str, source_id: str, evidence_dir: str, title=None, author=None, published=None,
                 url=None, coverage="full", force=False, timeout=TIMEOUT, max_bytes=MAX_BYTES,
                 today=None, kind="primary", retells=None) -> dict:
    """Cache `target` (an http(s) URL or a local file) as evidence/<source_id>.md; return what was written.

    `kind` is "primary" (the page's author wrote it) or "secondary" (it retells another work:
    `retells` is then {"title", "author", "url"} of that work)."""
    if not is_kebab_id(source_id or ""):
        raise EvidenceUsage(f"--id '{source_id}' must be kebab-case: lower-case letters, digits, single hyphens")
    if coverage not in ("full", "excerpt"):
        raise EvidenceUsage("--coverage must be full or excerpt")
    retells = {k: v for k, v in (retells or {}).items() if v}
    if kind not in ("primary", "secondary"):
        raise EvidenceUsage("--kind must be primary or secondary")
    if kind == "primary" and retells:
        raise EvidenceUsage("--retells-* describe the work a secondary source retells; add --kind secondary")
    if kind == "secondary":
        missing = [f"--retells-{k}" for k in ("title", "author", "url") if k not in retells]
        if missing:
            raise EvidenceUsage(f"a secondary source names the work it retells: give {', '.join(missing)}")
    if published is not None and published != "unknown" and not _iso_date(published):
        raise EvidenceUsage(f"--published '{published[:40]}' is not a date: give YYYY-MM-DD, or 'unknown'")
    if not 0 < timeout < float("inf"):  # also refuses nan
        raise EvidenceUsage(f"--timeout must be a positive number of seconds, not {timeout:g}")
    if max_bytes < 1:
        raise EvidenceUsage(f"--max-bytes must be at least 1, not {max_bytes}")
    try:
        os.makedirs(evidence_dir, exist_ok=True)
        existing = [n for n in os.listdir(evidence_dir) if os.path.splitext(n)[0] == source_id]
    except OSError as exc:
        raise EvidenceError(f"{evidence_dir}: cannot use it as the evidence folder: {exc.strerror}") from None
    if existing and not force:
        raise EvidenceError(f"evidence/{existing[0]} already exists; pass --force to replace it "
                            f"(quotes citing its lines may then need `kb verify --fix-lines`)")
    if "://" in target:
        raw, ctype, charset, final = fetch(target, timeout=timeout, max_bytes=max_bytes)
        record_url = url or final
    else:
        if not os.path.isfile(target):
            raise EvidenceUsage(f"{target}: neither an http(s) URL nor a readable file")
        size = os.path.getsize(target)
        if size > max_bytes:
            raise EvidenceError(f"{target}: {size:,} bytes, over the {max_bytes:,}-byte cap (--max-bytes)")
        with open(target, "rb") as fh:
            raw = fh.read()
        ext = os.path.splitext(target)[1].lower()
        ctype = "text/html" if ext in (".html", ".htm", ".xhtml") else ("text/plain" if ext else "")
        charset, record_url = None, url or f"file://{os.path.abspath(target)}"
    if not ctype:
        ctype = "text/html" if _looks_like_html(raw) else ("text/plain" if b"\x00" not in raw[:8192] else "")
    if ctype in _HTML_TYPES or (ctype.startswith("text/") and _looks_like_html(raw) and ctype != "text/plain"):
        text, meta = html_to_text(_decode(raw, charset, target))
    elif ctype.startswith(_TEXT_TYPES) and b"\x00" not in raw[:8192]:
        text, meta = _decode(raw, charset, target), {}
        if not text.endswith("\n"):
            text += "\n"
    else:
        raise EvidenceError(f"{target}: the reply is {ctype or 'binary data'}, not HTML or text; save a text "
                            f"version (e.g. the PDF's text) and add that file instead")
    text = strip_controls(text)
    meta = {k: strip_controls(v, keep_lines=False) for k, v in meta.items()}
    title, author, published, url = (strip_controls(v, keep_lines=False) if v else v
                                     for v in (title, author, published, url))
    if not text.strip():
        raise EvidenceError(f"{target}: no readable text in the reply")
    body = "\n" + text  # a blank line between the front matter and the text
    front = {
        "title": title or meta.get("title") or source_id,
        "author": author or meta.get("author") or "unknown",
        "kind": kind,
        "url": record_url if url or "://" not in target else (meta.get("url") or record_url),
        "published": published or (meta.get("published") or "unknown")[:10],
        "retrieved": (today or datetime.date.today()).isoformat(),
        "coverage": coverage,
        "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(),  # of the body, as `kb verify` checks it
    }
    if "://" in target and front["url"] != target:
        front["note"] = f"fetched from {target}"
    lines = ["---"]
    for k, v in front.items():
        lines.append(f"{k}: {_yaml_value(v)}")
        if k == "kind" and kind == "secondary":
            lines += ["retells:"] + [f"  {f}: {_yaml_value(retells[f])}" for f in ("title", "author", "url")]
    content = "\n".join(lines + ["---"]) + "\n" + body
    path = os.path.join(evidence_dir, f"{source_id}.md")
    try:
        write_atomic(path, content, exclusive=not force)  # two adds of one id: exactly one wins
    except FileExistsError:
        raise EvidenceError(f"evidence/{source_id}.md already exists; pass --force to replace it "
                            f"(quotes citing its lines may then need `kb verify --fix-lines`)") from None
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot write: {exc.strerror}") from None
    for name in existing:  # --force with another extension: one file per source id
        if name != f"{source_id}.md":
            os.remove(os.path.join(evidence_dir, name))
    if kind == "secondary":
        front["retells"] = {f: retells[f] for f in ("title", "author", "url")}
    return {"path": path, "id": source_id, "lines": content.count("\n"), "content_type": ctype or "text/plain",
            "bytes": len(raw), **front}


def rehash_sources(kb, ids=None) -> list:
    """Record each source's current body sha256 in its front matter, after a deliberate edit.

    Only the `sha256:` line changes (added above the closing `---` if missing, which moves
    the body down a line). Returns (path, old, new, added) per source whose record changed.
    """
    base = os.path.dirname(kb.root)
    from kb_tools.core.load import body_sha256
    unknown = [i for i in (ids or ()) if i not in kb.sources]
    if unknown:
        raise EvidenceUsage(f"unknown source '{unknown[0]}'{did_you_mean(unknown[0], kb.sources)}")
    changed = []
    for sid in (ids or sorted(kb.sources)):
        source = kb.sources[sid]
        path = os.path.join(base, source.path)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise EvidenceError(f"{source.path}: cannot read: {exc.strerror}") from None
        new = body_sha256(data, source.body_line)
        if source.sha256 == new:
            continue
        lines = data.split(b"\n")
        head = range(1, source.body_line - 2)  # the front matter's own lines, 0-based
        at = next((i for i in head if lines[i].startswith(b"sha256:")), None)
        if at is None:
            lines.insert(source.body_line - 2, f"sha256: {new}".encode())
        else:
            lines[at] = f"sha256: {new}".encode()
        try:
            write_atomic(path, b"\n".join(lines))
        except OSError as exc:
            raise EvidenceError(f"{path}: cannot write: {exc.strerror}") from None
        changed.append((source.path, source.sha256, new, at is None))
    return changed
