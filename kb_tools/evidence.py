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

from .load import is_kebab_id, write_atomic

MAX_BYTES = 5_000_000
TIMEOUT = 20.0
USER_AGENT = "kb-tools evidence cache (+https://github.com/)"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml", "application/yaml")
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "nav", "form", "button")


class EvidenceError(Exception):
    """The source could not be cached (network, size, type, existing file): exit 1."""


class EvidenceUsage(EvidenceError):
    """The request itself is wrong (scheme, id): exit 2."""


# ---------------------------------------------------------------- fetching

def _opener():
    import urllib.request

    class SafeRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            if not newurl.lower().startswith(("http://", "https://")):
                raise EvidenceError(f"refusing a redirect to {newurl}: only http and https are fetched")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(SafeRedirect)


def fetch(url: str, timeout: float = TIMEOUT, max_bytes: int = MAX_BYTES):
    """GET `url` within `timeout` seconds in all and `max_bytes` at most.

    Returns (raw bytes, content type, charset or None, final URL).
    """
    import socket
    import time
    import urllib.error
    import urllib.request
    if not url.lower().startswith(("http://", "https://")):
        raise EvidenceUsage(f"only http and https URLs can be fetched, not {url.split(':', 1)[0]}:")
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, headers={
        "User-Agent": USER_AGENT, "Accept": "text/html, text/plain;q=0.9, */*;q=0.1"})
    try:
        with _opener().open(request, timeout=timeout) as resp:
            ctype = resp.headers.get_content_type() if resp.headers.get("Content-Type") else ""
            charset = resp.headers.get_content_charset()
            declared = resp.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise EvidenceError(f"{url}: the page is {int(declared):,} bytes, over the {max_bytes:,}-byte cap "
                                    f"(--max-bytes)")
            chunks, total = [], 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EvidenceError(f"{url}: download took longer than {timeout:g}s (--timeout)")
                if resp.fp is not None and getattr(resp.fp, "raw", None) is not None:
                    try:
                        resp.fp.raw._sock.settimeout(left)  # each wait is bounded by what is left
                    except (AttributeError, OSError):
                        pass
                try:
                    chunk = resp.read1(65536)
                except (socket.timeout, TimeoutError):
                    raise EvidenceError(f"{url}: download took longer than {timeout:g}s (--timeout)") from None
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise EvidenceError(f"{url}: the page is over the {max_bytes:,}-byte cap (--max-bytes)")
                chunks.append(chunk)
            return b"".join(chunks), ctype, charset, resp.geturl()
    except EvidenceError:
        raise
    except urllib.error.HTTPError as exc:
        raise EvidenceError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise EvidenceError(f"{url}: no answer within {timeout:g}s (--timeout)") from None
        raise EvidenceError(f"{url}: {reason}") from None
    except (socket.timeout, TimeoutError):
        raise EvidenceError(f"{url}: no answer within {timeout:g}s (--timeout)") from None
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"{url}: {exc}") from None


# ---------------------------------------------------------------- converting

def _looks_like_html(raw: bytes) -> bool:
    head = raw[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head[:256]


def _decode(raw: bytes, charset: str | None) -> str:
    if not charset:
        meta = re.search(rb"<meta[^>]+charset=[\"']?([\w-]+)", raw[:4096], re.I)
        charset = meta.group(1).decode("ascii") if meta else "utf-8"
    try:
        return raw.decode(charset, errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


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
        if tag and tag.get("content") and key not in meta:
            meta[key] = " ".join(tag["content"].split())
    canonical = soup.find("link", rel="canonical")
    if canonical and canonical.get("href", "").startswith(("http://", "https://")):
        meta["url"] = canonical["href"]
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
        text, meta = html_to_text(_decode(raw, charset))
    elif ctype.startswith(_TEXT_TYPES) and b"\x00" not in raw[:8192]:
        text, meta = _decode(raw, charset).replace("\r\n", "\n"), {}
        if not text.endswith("\n"):
            text += "\n"
    else:
        raise EvidenceError(f"{target}: the reply is {ctype or 'binary data'}, not HTML or text; save a text "
                            f"version (e.g. the PDF's text) and add that file instead")
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
        write_atomic(path, content)
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
    from .load import body_sha256
    unknown = [i for i in (ids or ()) if i not in kb.sources]
    if unknown:
        from .load import _suggest
        raise EvidenceUsage(f"unknown source '{unknown[0]}'{_suggest(unknown[0], kb.sources)}")
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
