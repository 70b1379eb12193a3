"""Check every quote against its source: the words, their order, and where they are.

A quote is a claim about coordinates: these words, in this order, on exactly these
lines of the cached source (or in the docstring of this object of the installed
package). `verify_kb` checks each claim and reports at most one defect per quote,
the most basic one first, each with a word-level diff against the nearest passage
and that passage's line range.

Comparison is on words and punctuation marks: words case-folded, markup dropped
(markdown emphasis, code ticks, escapes, `#`, links and Sphinx roles reduced to their
shown text, a Markdown source's line-start blockquote markers and bullets, the quotes
that join a Python source's string literals across lines), so reflowed lines and
repeated spaces never count, and typographic variants are one mark: curly and straight
quotes, dashes and hyphens, `...` and `…`. A mark dropped, added or changed is a
changed passage, like a word. `[...]`, `...` and `…` in a quote are elisions: the
parts between them must each be verbatim, in order, and the marks next to an elision
are the editor's (not compared). Other square brackets (`[sic]`, `[the scheduler]`)
are the editor's words: skipped, and standing in for at most MAX_EDITORIAL source
words. A quote's `author`, when given, must be its source's author (a secondary
source's words are its own author's, never the retold author's), and a source that
records a `sha256` must still hash to it. The check runs without torch when the
package texts are cached (see `PackageTexts`).
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field

from kb_tools.core.model import KIND_CODES, VERIFY_CODES, format_diagnostic

MIN_WORDS = 6  # fewer words than this is too short to mean anything, unless `short: true`
MAX_EDITORIAL = 3  # source words an editorial insertion like `[the scheduler]` may stand in for

# Defect kinds, most basic first (model.VERIFY_CODES is the one list, with each kind's code).
KINDS = {name: meaning for name, meaning in VERIFY_CODES.values()}
FAIL_KINDS = tuple(k for k in KINDS if k != "unchecked")

SEGMENT_DOC = "docstring"
SEGMENT_MSG = "message"


# ---------------------------------------------------------------- normalising text

# typographic variants that count as the same mark: curly quotes and primes as straight ones,
# every dash and the minus sign as a hyphen; zero-width characters, the soft hyphen and
# emoji variation selectors show as nothing (NFKC has already made `…` into `...` and a
# non-breaking space into a space)
_QUOTE_CHARS = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                              "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                              **{c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"},
                              **{c: None for c in "\u00ad\u200b\u200c\u200d\u2060\ufeff\ufe0e\ufe0f"}})
# :role:`~a.b.C` shows as C, :role:`text <target>` as text, :role:`x` as x (how Sphinx renders them)
_ROLE = re.compile(r":(?:[A-Za-z][\w.+-]*:)+`([^`]*)`")
_LINK_MD = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_LINK_RST = re.compile(r"`([^`<\n]+?)\s*<[^>`]*>`__?")
# a token is a word (letters, digits, `_`, joined by `'`, `.` or `/`: don't, e.g, torch.nn, and/or)
# or one punctuation mark; a hyphen always stands apart, so `off-by-one`, `off - by - one` and a
# word hyphenated across a line break compare equal, and a run of dashes or dots is one mark.
# `*`, `` ` ``, `\` and `#` are markup (emphasis, code, escapes; headings, comments), never marks.
_TOKEN = re.compile(r"(\w+(?:['./]\w+)*)|\.{2,}|-+|[^\w\s*`\\#]")
# markup of a source's format, blanked before its text is read (a quote's line breaks are only
# reflow, so a quote keeps a `-` or `>` that a reflow put at the start of a line):
# in Markdown, blockquote markers and list bullets at the start of a line
_MD_LINE_MARKUP = re.compile(r"^[ \t]*(?:>[ \t>]*|[-+](?=[ \t]))", re.M)
_MARKDOWN_FILES = (".md", ".markdown", ".mdx", ".qmd")
# in Python, the quotes that join adjacent string literals across a line break:
# `"... loss is "` + newline + `"computed ..."` reads as one string
_PY_JOIN = re.compile(r"""(["'])[ \t]*\n[ \t]*(?:[rRbBuUfF]{1,2})?\1""")
_ELISION = re.compile(r"\[\s*(?:\.\s*\.\s*\.|\u2026)\s*\]|\.\s?\.\s?\.|\u2026")
# a quote that ends with an elision mark, perhaps closed by a quote mark, bracket or `.`, `!`, `?`
_ENDS_ELIDED = re.compile(r"(?:\[\s*(?:\.\s*\.\s*\.|\u2026)\s*\]|\.\s?\.\s?\.|\u2026)[\s\"'\u201d\u2019*_)\].!?]*$")
# square brackets other than an elision or a markdown link: the editor's own words
_EDITORIAL = re.compile(r"\[(?!\s*(?:\.\s*\.\s*\.|\u2026)\s*\])[^\[\]\n]*\](?!\()")
_END_PUNCT = re.compile(r"[.!?;:\u2026]|\n[ \t>]*\n")


def _keep(match, group=1):
    """Replace a markup span by its shown text, padded so offsets and line breaks stay put."""
    span, shown = match.group(0), match.group(group)
    if shown.startswith("~"):
        shown = shown[1:].rsplit(".", 1)[-1]
    elif "<" in shown and shown.rstrip().endswith(">"):
        shown = shown[:shown.rindex("<")].rstrip()
    newlines = span.count("\n")
    return shown + " " * (len(span) - len(shown) - newlines) + "\n" * newlines


def normalise(text: str) -> str:
    """The text as a reader sees it: unicode compatibility forms, straight quotes, hyphens for
    dashes, markup roles and links reduced to their shown words. Keeps every line break where it was."""
    import unicodedata
    text = "\n".join(unicodedata.normalize("NFKC", line).translate(_QUOTE_CHARS) for line in text.split("\n"))
    if "`" in text:
        text = _ROLE.sub(_keep, text)
        text = _LINK_RST.sub(_keep, text)
    if "](" in text:
        text = _LINK_MD.sub(_keep, text)
    return text


def _blank(match):
    """Blank a markup span, keeping its line breaks."""
    return re.sub(r"[^\n]", " ", match.group(0))


def source_text(body: str, source) -> str:
    """A cached source's body with the markup of its file format blanked (lines stay put): a
    Markdown file's line-start blockquote markers and bullets (a web page is cached as Markdown),
    a Python file's quotes that join string literals across lines."""
    name = (source.repo_path or "").lower() if source.repo else ".md"
    if name.endswith(_MARKDOWN_FILES):
        body = _MD_LINE_MARKUP.sub(_blank, body)
    elif name.endswith(".py"):
        body = _PY_JOIN.sub(_blank, body)
    return body


def tokens_of(text: str, first_line: int = 1) -> list:
    """Tokens of `text` as (key, surface, line, ends_sentence, is_word, spaced): a word
    (key case-folded) or a punctuation mark (key `-` for any dash, `...` for a run of dots),
    with markup (emphasis, code ticks, escapes, block markers) and whitespace dropped.
    ends_sentence says whether the source stops there: sentence punctuation or a blank line
    between the token's word and the next word. spaced: whitespace came before it (to show it)."""
    from bisect import bisect_left, bisect_right
    text = normalise(text)
    breaks = [m.start() for m in re.finditer("\n", text)]
    marks = [m.start() for m in _END_PUNCT.finditer(text)]
    spans = []
    for m in _TOKEN.finditer(text):
        start, end, surface, word = m.start(), m.end(), m.group(0), m.group(1) is not None
        if word and (surface[0] == "_" or surface[-1] == "_"):
            core = surface.strip("_")
            if not core:
                continue
            start += surface.index(core)
            end, surface = start + len(core), core
        spans.append((start, end, surface, word))
    # each token's gap: from the end of its word (the last word at or before it) to the next word
    gap_end, nxt = [0] * len(spans), len(text) + 1
    for n in range(len(spans) - 1, -1, -1):
        gap_end[n] = nxt
        if spans[n][3]:
            nxt = spans[n][0]
    out, gap_start, prev_end, prev_word = [], 0, None, False
    n_marks = len(marks)
    for n, (start, end, surface, word) in enumerate(spans):
        if word:
            gap_start = end
        j = bisect_left(marks, gap_start)
        ends = gap_end[n] > len(text) or (j < n_marks and marks[j] < gap_end[n])
        between = text[prev_end:start] if prev_end is not None else ""
        spaced = any(c.isspace() for c in between) or bool(between and word and prev_word)
        if not word:
            key = "-" if surface[0] == "-" else "..." if surface[:2] == ".." else surface
        else:
            key = surface.casefold()
        out.append((key, surface, first_line + bisect_right(breaks, start), ends, word, spaced))
        prev_end, prev_word = end, word
    return out


def render(tokens) -> str:
    """Tokens shown as text: their surfaces, spaced where the text had whitespace."""
    return "".join((" " if t[5] and n else "") + t[1] for n, t in enumerate(tokens))


def count_words(tokens) -> int:
    return sum(1 for t in tokens if t[4])


def quote_parts(text: str) -> list:
    """The quote's parts, each a list of tokens (empty parts dropped): split at elisions and
    at editorial insertions in square brackets, whose words are not the source's."""
    return split_quote(text)[0]


def split_quote(text: str) -> tuple:
    """(parts, gaps): gaps[k] is how many source words may lie between part k-1 and part k
    (None: any number, after an elision; MAX_EDITORIAL after an editorial insertion).
    Punctuation next to an elision is the editor's: `dog, [...]` and `[...]. The` cut there,
    whatever marks the source has at the cut, so it is not compared; a part without a word is dropped."""
    parts, gaps = [], []
    chunks = _ELISION.split(text or "")
    for c, chunk in enumerate(chunks):
        loose = True
        pieces = _EDITORIAL.split(chunk) if "[" in chunk else [chunk]
        for i, piece in enumerate(pieces):
            toks = tokens_of(piece)
            if c > 0 and i == 0:
                while toks and not toks[0][4]:
                    toks.pop(0)
            if c < len(chunks) - 1 and i == len(pieces) - 1:
                while toks and not toks[-1][4]:
                    toks.pop()
            if any(t[4] for t in toks):
                parts.append(toks)
                gaps.append(None if loose or not parts[:-1] else MAX_EDITORIAL)
            loose = False
    return parts, gaps


class Passage:
    """One stretch of source text, indexed for exact and nearest-passage search."""

    __slots__ = ("label", "tokens", "words", "surface", "lines", "ends", "wordno", "joined", "offsets", "_index")

    def __init__(self, text: str, first_line: int = 1, label: str = ""):
        toks = tokens_of(text, first_line)
        self.label = label
        self.tokens = toks
        self.words = [t[0] for t in toks]   # the keys compared: words and punctuation marks
        self.surface = [t[1] for t in toks]
        self.lines = [t[2] for t in toks]
        self.ends = [t[3] for t in toks]
        # wordno[i]: how many words (not marks) come before token i; one more entry for the end
        self.wordno, n = [], 0
        for t in toks:
            self.wordno.append(n)
            n += t[4]
        self.wordno.append(n)
        # " w0 w1 w2 ": str.find on whole words, offsets map a hit back to a token index
        self.offsets, pos = [], 1
        for w in self.words:
            self.offsets.append(pos)
            pos += len(w) + 1
        self.joined = " " + " ".join(self.words) + " "
        self._index: dict | None = None

    def find_all(self, words: list) -> list:
        """Token indexes where `words` occur contiguously."""
        import bisect
        needle = " " + " ".join(words) + " "
        hits, at = [], self.joined.find(needle)
        while at != -1:
            hits.append(bisect.bisect_left(self.offsets, at + 1))
            at = self.joined.find(needle, at + 1)
        return hits

    def index(self) -> dict:
        if self._index is None:
            idx = {}
            for i, w in enumerate(self.words):
                idx.setdefault(w, []).append(i)
            self._index = idx
        return self._index

    def nearest(self, words: list):
        """(score, start, end) of the stretch most like `words`: matched words / len(words)."""
        import difflib
        from collections import Counter
        idx, votes = self.index(), Counter()
        for i, w in enumerate(words):
            hits = idx.get(w, ())
            if len(hits) <= 64:  # very common words say little about where the quote is
                for j in hits:
                    votes[j - i] += 1
        best = (0.0, 0, 0)
        slack = len(words) // 3 + 2
        for offset, _ in votes.most_common(4):
            lo, hi = max(0, offset - slack), min(len(self.words), offset + len(words) + slack)
            sm = difflib.SequenceMatcher(None, words, self.words[lo:hi], autojunk=False)
            blocks = [b for b in sm.get_matching_blocks() if b.size]
            # a lone mark matched past a gap at either end is a stray (the quote's final `,` paired
            # with a comma further on): leave it out, so the quote's mark faces the source's at the edge
            while len(blocks) > 1 and self._marks_only(lo + blocks[-1].b, blocks[-1].size) \
                    and blocks[-1].b > blocks[-2].b + blocks[-2].size:
                blocks.pop()
            while len(blocks) > 1 and self._marks_only(lo + blocks[0].b, blocks[0].size) \
                    and blocks[1].b > blocks[0].b + blocks[0].size:
                blocks.pop(0)
            if not blocks:
                continue
            score = sum(b.size for b in blocks) / len(words)
            if score > best[0]:
                start, end = lo + blocks[0].b, lo + blocks[-1].b + blocks[-1].size
                # the quote's unmatched marks at either end face the source's marks there
                head, tail = blocks[0].a, len(words) - blocks[-1].a - blocks[-1].size
                while head and start > 0 and self._marks_only(start - 1, 1):
                    start, head = start - 1, head - 1
                while tail and end < len(self.words) and self._marks_only(end, 1):
                    end, tail = end + 1, tail - 1
                best = (score, start, end)
        return best

    def _marks_only(self, start: int, size: int) -> bool:
        return not any(t[4] for t in self.tokens[start:start + size])


# ---------------------------------------------------------------- package sources

def resolve_object(dotted: str):
    """Import the longest module prefix of `dotted`, then walk attributes (LookupError if absent)."""
    import importlib
    parts = dotted.split(".")
    obj, i = None, 0
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ImportError:
            continue
    else:
        raise LookupError(f"no module named '{parts[0]}'")
    for n, name in enumerate(parts[i:], i):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            raise LookupError(f"'{'.'.join(parts[:n])}' has no attribute '{name}'") from None
    return obj


def object_segments(dotted: str) -> list:
    """The quotable text of an installed object: its docstring, then (for a function) the
    messages in its own source, i.e. string literals of four words or more, such as the
    warnings it issues. Each is returned as (kind, text) and matched on its own."""
    import inspect
    obj = resolve_object(dotted)
    segments = []
    doc = inspect.getdoc(obj)
    if doc:
        segments.append((SEGMENT_DOC, doc))
    func = getattr(obj, "__func__", obj)
    if inspect.isfunction(func):
        import ast
        import textwrap
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
        except (OSError, TypeError, SyntaxError):
            tree = None
        if tree is not None:
            body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else []
            skip = body[0].value if body and isinstance(body[0], ast.Expr) else None
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node is not skip
                        and len(node.value.split()) >= 4):
                    segments.append((SEGMENT_MSG, node.value))
    return segments


def _find_distribution(package: str):
    """(version, stamp) of an installed distribution, or None; without importing the package.

    Looks for <package>-<version>.dist-info beside the package's own directory first
    (a directory listing, far cheaper than importing importlib.metadata), then falls
    back to importlib.metadata for unusual installs.
    """
    import importlib.util
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    where = spec.submodule_search_locations[0] if spec.submodule_search_locations else (spec.origin or "")
    site = os.path.dirname(where)
    prefix = package.replace("-", "_").lower() + "-"
    try:
        names = [n for n in os.listdir(site) if n.lower().startswith(prefix) and n.endswith(".dist-info")]
    except OSError:
        names = []
    for name in names:
        meta = os.path.join(site, name, "METADATA")
        try:
            with open(meta, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Version:"):
                        version = line.split(":", 1)[1].strip()
                        return version, f"{version}|{meta}|{os.stat(meta).st_mtime_ns}"
                    if not line.strip():
                        break
        except OSError:
            continue
    from importlib import metadata
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return None
    return dist.version, f"{dist.version}|{getattr(dist, '_path', '')}"


class NotInstalled(Exception):
    """The package a source documents is not installed: its quotes are unchecked."""


class PackageTexts:
    """Object texts of installed packages, cached on disk per (package, version, install).

    Importing torch takes seconds; the texts it yields only change when the installed
    distribution does. The cache key is the version plus the path and mtime of the
    distribution's metadata, so an upgrade or reinstall re-reads the real docstrings.
    """

    def __init__(self, cache_dir: str | None):
        self.cache_dir = cache_dir
        self._dists = {}
        self._texts = {}
        self._dirty = set()

    def version(self, package: str) -> str:
        """The installed version (NotInstalled if absent)."""
        return self._dist(package)[0]

    def _dist(self, package):
        if package not in self._dists:
            self._dists[package] = _find_distribution(package)
        if self._dists[package] is None:
            raise NotInstalled(package)
        return self._dists[package]

    def _cache_file(self, package):
        import hashlib
        key = hashlib.sha1(self._dist(package)[1].encode()).hexdigest()[:16]
        return os.path.join(self.cache_dir, f"verify-{package}-{key}.json")

    def segments(self, package: str, dotted: str) -> list:
        """[(kind, text)] for `dotted` in the installed `package`; LookupError if it is absent."""
        self._dist(package)
        if package not in self._texts:
            self._texts[package] = {}
            if self.cache_dir:
                import json
                try:
                    with open(self._cache_file(package), encoding="utf-8") as fh:
                        self._texts[package] = json.load(fh)
                except (OSError, ValueError):
                    pass
        texts = self._texts[package]
        if dotted not in texts:
            if not (dotted == package or dotted.startswith(package + ".")):
                texts[dotted] = {"error": f"'{dotted}' is not in package '{package}'"}
            else:
                try:
                    texts[dotted] = {"segments": object_segments(dotted)}
                except LookupError as exc:
                    texts[dotted] = {"error": str(exc)}
                except Exception as exc:  # noqa: BLE001 - an import that fails for its own reasons
                    texts[dotted] = {"error": f"importing it failed: {type(exc).__name__}: {exc}"}
            self._dirty.add(package)
        found = texts[dotted]
        if "error" in found:
            raise LookupError(found["error"])
        return [tuple(s) for s in found["segments"]]

    def save(self) -> None:
        if not self.cache_dir:
            return
        import json

        from kb_tools.core.util import write_atomic
        for package in self._dirty:
            try:
                os.makedirs(self.cache_dir, exist_ok=True)
                write_atomic(self._cache_file(package), json.dumps(self._texts[package]))
            except OSError:
                pass  # an unwritable cache only costs speed
        self._dirty.clear()


# ---------------------------------------------------------------- results

@dataclass
class Defect:
    """One thing wrong with one quote; `found` holds the real line range for --fix-lines.
    Printed like a `kb check` problem, with the quote id as subject: `path:line: KB105 id: kind: ...`."""

    path: str
    line: int
    quote: str              # the quote's id (a source's id for cache-changed)
    kind: str               # a defect kind of model.VERIFY_CODES
    message: str
    diff: str = ""
    where: str = ""         # the nearest passage, as path:Lfirst-last
    lines: list | None = None
    found: list | None = None
    code: str = field(init=False)

    def __post_init__(self):
        if self.kind not in KIND_CODES:
            raise ValueError(f"unknown defect kind {self.kind!r}: add it to model.VERIFY_CODES first")
        self.code = KIND_CODES[self.kind]

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self):
        head = format_diagnostic(self.path, self.line, self.code, self.quote, f"{self.kind}: {self.message}")
        if self.where:
            head += f"\n    nearest passage: {self.where}"
        if self.diff:
            head += f"\n    diff: {self.diff}"
        return head


@dataclass
class Report:
    """The outcome of verifying a KB: defects, unchecked quotes and what was checked against."""

    quotes: int = 0
    sources: int = 0                                # cached sources whose recorded sha256 was checked
    defects: list = field(default_factory=list)     # Defect, kind in FAIL_KINDS
    unchecked: list = field(default_factory=list)   # Defect, kind "unchecked"
    packages: dict = field(default_factory=dict)    # package -> installed version, or None when absent
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        """Quotes with a defect. A cache-changed defect is a source's, not a quote's: counted in
        sources_changed, so that passed + failed + unchecked is the number of quotes."""
        return sum(d.kind != "cache-changed" for d in self.defects)

    @property
    def sources_changed(self) -> int:
        return sum(d.kind == "cache-changed" for d in self.defects)

    @property
    def passed(self) -> int:
        return self.quotes - self.failed - len(self.unchecked)

    def ok(self, strict: bool = False) -> bool:
        return not self.defects and not (strict and self.unchecked)

    def to_dict(self, strict: bool = False) -> dict:
        return {"ok": self.ok(strict), "strict": strict, "quotes": self.quotes, "passed": self.passed,
                "sources_hashed": self.sources, "sources_changed": self.sources_changed,
                "failed": self.failed, "unchecked": len(self.unchecked), "packages": self.packages,
                "seconds": round(self.seconds, 4),
                "defects": [d.to_dict() for d in self.defects],
                "unchecked_quotes": [d.to_dict() for d in self.unchecked]}


@dataclass
class Placement:
    """Where `_locate` found a quote's parts in a list of passages.

    how: "ok" (every part, in order; `starts` holds each part's first word), "gap" (in
    order, but an editorial insertion stands in for too many words; `starts` as for ok),
    "order" (every part present, not in the quoted order; `occurrences` of each part), or
    "fuzzy" (some part is nowhere verbatim: `part` is its index, and `start`..`end` the
    nearest span of `passage`, matching `score` of its words; `passage` is None if none).
    """

    how: str
    passage: "Passage | None" = None
    starts: list = field(default_factory=list)
    occurrences: list = field(default_factory=list)
    score: float = 0.0
    start: int = 0
    end: int = 0
    part: int = 0


# ---------------------------------------------------------------- checking

class Context:
    """What checking needs across quotes: the KB, parsed sources, package texts."""

    def __init__(self, kb, packages: PackageTexts | None = None):
        self.kb = kb
        self.base = os.path.dirname(kb.root)
        self.packages = packages if packages is not None else PackageTexts(_cache_dir(kb.root))
        self._cached = {}
        self._raw = {}
        self._objects = {}

    def raw(self, source) -> bytes:
        """The bytes of a source's cache file, read once (OSError if it is gone)."""
        if source.id not in self._raw:
            with open(os.path.join(self.base, source.path), "rb") as fh:
                self._raw[source.id] = fh.read()
        return self._raw[source.id]

    def cached(self, source) -> list:
        """The body of a cached source as one Passage (OSError if the file is gone)."""
        if source.id not in self._cached:
            text = self.raw(source).decode("utf-8", errors="replace")
            lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as text mode reads it
            first = source.body_line or 1
            self._cached[source.id] = [Passage(source_text("\n".join(lines[first - 1:]), source), first,
                                               source.path)]
        return self._cached[source.id]

    def installed(self, package: str, dotted: str) -> list:
        key = (package, dotted)
        if key not in self._objects:
            segs = self.packages.segments(package, dotted)
            version = self.packages.version(package)
            self._objects[key] = [
                Passage(text, 1, f"{dotted} {'docstring' if kind == SEGMENT_DOC else 'source message'}"
                                 f" ({package} {version})")
                for kind, text in segs]
        return self._objects[key]


def _cache_dir(kb_root: str) -> str | None:
    """Where package texts are cached: the loader's cache directory (KB_NO_CACHE: nowhere)."""
    from kb_tools.core import cache
    return cache.cache_dir() if cache.enabled() else None


def _span_text(p: Passage, start: int, end: int, limit: int = 24) -> str:
    return _shown(p.tokens[start:end], limit)


def _shown(tokens: list, limit: int = 24) -> str:
    """Tokens as text, the middle left out past `limit` tokens."""
    if len(tokens) > limit:
        return render(tokens[: limit // 2]) + " ... " + render(tokens[-limit // 2:]).lstrip()
    return render(tokens)


def _where(p: Passage, start: int, end: int) -> str:
    first, last = p.lines[start], p.lines[max(start, end - 1)]
    return f"{p.label}:L{first}-{last}" if first != last else f"{p.label}:L{first}"


def _context(tokens: list, lo: int, hi: int, before: int = 3, after: int = 2) -> str:
    """tokens[lo:hi] shown with up to `before` words ahead of it and `after` words behind it."""
    if before:
        while lo > 0 and before:
            lo -= 1
            before -= tokens[lo][4]
        while lo > 0 and not tokens[lo - 1][4] and not tokens[lo][5]:   # marks glued to the first word shown
            lo -= 1
    while hi < len(tokens) and (after or not tokens[hi][4]):
        after -= tokens[hi][4]
        hi += 1
    return render(tokens[lo:hi]).strip()


def _word_diff(part: list, p: Passage, start: int, end: int):
    """A git-style word diff ([-source-]{+quote+}) and a short summary of the changes. A change of
    punctuation alone is shown in context: the source's words around it, and the quote's."""
    import difflib
    sm = difflib.SequenceMatcher(None, [t[0] for t in part], p.words[start:end], autojunk=False)
    pieces, changes = [], []   # pieces: (text, spaced)
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        src = p.tokens[start + b0:start + b1]
        said = part[a0:a1]
        if op == "equal":
            if len(src) > 8:
                pieces += [(render(src[:3]), src[0][5]), ("...", True), (render(src[-3:]).lstrip(), True)]
            else:
                pieces.append((render(src), bool(src[0][5])))
            continue
        old, new = render(src).strip(), render(said).strip()
        words = any(t[4] for t in src + said)
        if words:
            if op == "replace":
                changes.append(f"swapped '{old}' -> '{new}'")
            elif op == "delete":
                changes.append(f"added '{new}'")
            else:
                changes.append(f"dropped '{old}'")
        else:
            # in backticks, which the shown text never holds (code ticks are markup)
            what = (f"changed `{old}` -> `{new}`" if op == "replace" else
                    f"added `{new}`" if op == "delete" else f"dropped `{old}`")
            changes.append(f"{what}: the source has `{_context(p.tokens, start + b0, start + b1)}`, "
                           f"the quote `{_context(part, a0, a1)}`")
        if src:
            pieces.append(("[-" + old + "-]", bool(src[0][5])))
        if said:
            # after a removed word a space, as git's word diff shows it; after a removed mark none
            pieces.append(("{+" + new + "+}", bool(said[0][5]) if not src else words))
    shown = "".join((" " if spaced and n else "") + text for n, (text, spaced) in enumerate(pieces))
    return shown, changes


def _chain(occurrences: list, sizes: list, lo_line=None, hi_line=None, lines=None, gaps=None, wordno=None):
    """Earliest in-order placement of the parts, optionally all inside [lo_line, hi_line] and
    with at most gaps[k] words before part k (None: any); `wordno` counts words, not marks."""
    placed, pos = [], 0
    for k, (occ, size) in enumerate(zip(occurrences, sizes)):
        limit = gaps[k] if gaps and placed else None
        for start in occ:
            if start < pos:
                continue
            if limit is not None and (wordno[start] - wordno[pos] if wordno else start - pos) > limit:
                return None
            if lo_line is not None and not (lo_line <= lines[start] and lines[start + size - 1] <= hi_line):
                continue
            placed.append(start)
            pos = start + size
            break
        else:
            return None
    return placed


def _locate(parts: list, passages: list, cited, gaps=None):
    """Where the parts are in `passages` (see Placement); inside the `cited` lines when possible."""
    sizes = [len(part) for part in parts]
    words = [[t[0] for t in part] for part in parts]
    fallback = None
    for p in passages:
        occ = [p.find_all(w) for w in words]
        if not all(occ):
            continue
        if cited is not None:
            inside = _chain(occ, sizes, cited[0], cited[1], p.lines, gaps, p.wordno)
            if inside:
                return Placement("ok", p, starts=inside)
        anywhere = _chain(occ, sizes, gaps=gaps, wordno=p.wordno)
        if anywhere is None and gaps and any(g is not None for g in gaps):
            # a phrase that occurs twice: anchor the first part at each occurrence in turn
            anywhere = next(filter(None, (_chain([[first]] + occ[1:], sizes, gaps=gaps, wordno=p.wordno)
                                           for first in occ[0][1:50])), None)
        if anywhere is None and gaps and any(g is not None for g in gaps):
            spread = _chain(occ, sizes)
            if spread:
                fallback = fallback or Placement("gap", p, starts=spread)
                continue
        if anywhere:
            if cited is not None:
                # the placement nearest the cited lines, for the message and for --fix-lines
                best = None
                for first in occ[0][:50]:
                    trial = _chain([[first]] + occ[1:], sizes, gaps=gaps, wordno=p.wordno)
                    if trial:
                        dist = abs(p.lines[trial[0]] - cited[0])
                        if best is None or dist < best[0]:
                            best = (dist, trial)
                anywhere = best[1] if best else anywhere
            return Placement("ok", p, starts=anywhere)
        fallback = fallback or Placement("order", p, occurrences=occ)
    if fallback:
        return fallback
    # some part is not verbatim anywhere: find the nearest passage for the first such part
    nearest = None
    for k, w in enumerate(words):
        if any(p.find_all(w) for p in passages):
            continue
        for p in passages:
            score, start, end = p.nearest(w)
            if nearest is None or score > nearest.score:
                nearest = Placement("fuzzy", p, score=score, start=start, end=end, part=k)
        break
    return nearest or Placement("fuzzy")


def check_quote(quote, ctx: Context):
    """The defect of one quote (kind in KINDS), or None when it is verbatim on its cited lines."""
    kb = ctx.kb

    def defect(kind, message, **kw):
        return Defect(quote.path, quote.line, quote.id, kind, message, **kw)

    source = kb.sources.get(quote.source) if isinstance(quote.source, str) else None
    if source is None:
        from kb_tools.core.util import did_you_mean
        hint = did_you_mean(str(quote.source), kb.sources)
        return defect("unknown-source", f"no cached source '{quote.source}' (evidence/{quote.source}.md "
                                        f"does not exist){hint}")
    if quote.author is not None and quote.author != source.author:
        return defect("wrong-author", _author_message(quote, source))
    if not isinstance(quote.text, str) or (quote.object is not None and not isinstance(quote.object, str)):
        return defect("not-found", "the quote's `text` (or `object`) is not text; see `kb check`")
    cited = None
    if quote.object:
        if not source.package:
            return defect("unknown-source", f"cites object '{quote.object}', but source '{source.id}' is "
                                            f"a cached file, not an installed package: cite `lines` instead")
        try:
            passages = ctx.installed(source.package, quote.object)
        except NotInstalled:
            return defect("unchecked", f"package '{source.package}' is not installed, so '{quote.object}' "
                                       f"cannot be checked (the cache {source.path} is from "
                                       f"{source.package} {source.version or '?'})")
        except LookupError as exc:
            version = ctx.packages.version(source.package)
            return defect("unknown-source", f"{source.package} {version}: {exc}")
        if not passages:
            return defect("not-found", f"'{quote.object}' has no docstring in {source.package} "
                                       f"{ctx.packages.version(source.package)}")
    else:
        try:
            passages = ctx.cached(source)
        except OSError as exc:
            return defect("unknown-source", f"cannot read the cache file {source.path}: {exc.strerror}")
        if isinstance(quote.lines, list) and len(quote.lines) == 2:
            cited = tuple(quote.lines)

    parts, gaps = split_quote(quote.text)
    if not parts:
        return defect("not-found", "the quote has no words")
    located = _locate(parts, passages, cited, gaps)
    if quote.object and located.how != "ok":
        # the object is the citation's coordinate: is the text verbatim in another object the cache lists?
        for other in _cached_objects(ctx, source):
            if other == quote.object:
                continue
            try:
                elsewhere = _locate(parts, ctx.installed(source.package, other), None, gaps)
            except (LookupError, NotInstalled):
                continue
            if elsewhere.how == "ok":
                p, starts = elsewhere.passage, elsewhere.starts
                end = starts[-1] + len(parts[-1])
                return defect("wrong-lines", f"cites object {quote.object}, but the text is in {other}",
                              where=_where(p, starts[0], end), found=None)

    if located.how == "fuzzy":
        score, p, start, end, k = located.score, located.passage, located.start, located.end, located.part
        label = f"part {k + 1} of {len(parts)}: " if len(parts) > 1 else ""
        if p is not None and score >= 0.5 and count_words(parts[k]) >= 2 and end > start:
            shown, changes = _word_diff(parts[k], p, start, end)
            return defect("words-changed", label + "; ".join(changes or ["words differ"]),
                          diff=shown, where=_where(p, start, end),
                          lines=[p.lines[start], p.lines[end - 1]])
        near = ""
        if p is not None and end > start:
            near = f" (closest, {score:.0%} of its words: \"{_span_text(p, start, end)}\")"
        where = _where(p, start, end) if p is not None and end > start else ""
        return defect("not-found", f"{label}\"{_span_text_tokens(parts[k])}\" is not in {source.path}" + near,
                      where=where)

    if located.how == "gap":
        p, starts = located.passage, located.starts
        k = next(k for k in range(1, len(parts)) if gaps[k] is not None
                 and p.wordno[starts[k]] - p.wordno[starts[k - 1] + len(parts[k - 1])] > gaps[k])
        lo, hi = starts[k - 1] + len(parts[k - 1]), starts[k]
        end = starts[-1] + len(parts[-1])
        return defect("words-changed", f"a bracketed insertion before part {k + 1} of {len(parts)} stands in for "
                                       f"{p.wordno[hi] - p.wordno[lo]} source words ('{_span_text(p, lo, hi)}'), more than "
                                       f"{MAX_EDITORIAL}; quote them, or elide them with [...]",
                      where=_where(p, starts[0], end), lines=[p.lines[starts[0]], p.lines[end - 1]])

    if located.how == "order":
        p, occ = located.passage, located.occurrences
        at = ", ".join(f"part {n + 1} at L{p.lines[o[0]]}" for n, o in enumerate(occ))
        first = min(o[0] for o in occ)
        last = max(o[0] + len(part) for o, part in zip(occ, parts))
        return defect("out-of-order", f"every part is in the source, but not in the quoted order ({at})",
                      where=_where(p, first, last), lines=[p.lines[first], p.lines[last - 1]])

    p, starts = located.passage, located.starts
    end_tok = starts[-1] + len(parts[-1]) - 1
    span = [p.lines[starts[0]], p.lines[end_tok]]
    where = _where(p, starts[0], end_tok + 1)
    if not p.ends[end_tok] and not _ENDS_ELIDED.search(quote.text.strip()):
        nxt = _context(p.tokens, end_tok + 1, end_tok + 1, before=0, after=5)
        return defect("truncated", f"stops mid-sentence after '{p.surface[end_tok]}' (the source goes on: "
                                   f"'{nxt} ...'); end it with [...] or quote to the end of the sentence",
                      where=where, lines=span)
    words = sum(count_words(part) for part in parts)
    if words < MIN_WORDS and not quote.short:
        return defect("too-short", f"{words} word(s); a quote needs at least {MIN_WORDS}, or `short: true` "
                                   f"if the phrase itself is the point", where=where, lines=span)
    if quote.object:
        return None
    if cited != tuple(span):
        shown = f"L{cited[0]}-{cited[1]}" if cited else "no valid `lines`"
        return defect("wrong-lines", f"cites {shown}, but the text is at L{span[0]}-{span[1]}",
                      where=where, lines=span, found=span)
    return None


def _author_message(quote, source) -> str:
    retold = source.retells or {}
    if source.kind == "secondary" and quote.author == retold.get("author"):
        return (f"attributed to {quote.author}, but {source.path} is {source.author}'s retelling of "
                f"{quote.author}'s '{retold.get('title')}' (kind: secondary): its words are "
                f"{source.author}'s. Quote {quote.author}'s own text, or attribute it to {source.author}")
    return f"attributed to {quote.author}, but the text of {source.path} was written by {source.author}"


def check_source(source, ctx: Context):
    """A cache-changed defect when the source records a sha256 its body no longer has, else None."""
    if not source.sha256:
        return None
    try:
        data = ctx.raw(source)
    except OSError:
        return None  # its quotes report the unreadable file
    import hashlib

    from kb_tools.core.load import body_offset
    start = body_offset(data, source.body_line)
    actual = hashlib.sha256(data[start:]).hexdigest()
    if actual == source.sha256:
        return None
    head = data[:start].split(b"\n")
    line = next((n for n, text in enumerate(head, 1) if text.startswith(b"sha256:")), 1)
    return Defect(source.path, line, source.id, "cache-changed",
                  f"the body (from L{source.body_line}) hashes to {actual[:12]}..., not the recorded "
                  f"{source.sha256[:12]}...: the cached text changed since it was captured. Restore it from "
                  f"{_provenance(source)}, or after a deliberate edit run `kb evidence rehash {source.id}`")


def _provenance(source) -> str:
    if source.repo:
        return f"{source.repo}@{(source.commit or '')[:12]}:{source.repo_path}"
    if source.package:
        return f"{source.package} {source.version or ''}".strip()
    return source.url or "its url"


def _cached_objects(ctx, source) -> list:
    """Dotted paths whose text the source's cache file holds (its `## `dotted`` headings)."""
    try:
        with open(os.path.join(ctx.base, source.path), encoding="utf-8", errors="replace") as fh:
            return list(dict.fromkeys(re.findall(r"^## `([\w.]+)`", fh.read(), re.M)))
    except OSError:
        return []


def _span_text_tokens(part: list, limit: int = 12) -> str:
    return _shown(part, limit)


def verify_kb(kb, strict: bool = False, quotes=None, packages: PackageTexts | None = None) -> Report:
    """Verify `quotes` (default: every quote of the KB); `strict` only affects Report.ok()."""
    import time
    t0 = time.perf_counter()
    ctx = Context(kb, packages)
    report = Report()
    report_quotes = list(quotes) if quotes is not None else list(kb.quotes.values())
    for quote in report_quotes:
        report.quotes += 1
        found = check_quote(quote, ctx)
        if found is None:
            continue
        (report.unchecked if found.kind == "unchecked" else report.defects).append(found)
    cited = None if quotes is None else {q.source for q in report_quotes}
    for source in kb.sources.values():
        if source.sha256 and (cited is None or source.id in cited):
            report.sources += 1
            changed = check_source(source, ctx)
            if changed is not None:
                report.defects.append(changed)
    for source in kb.sources.values():
        if source.package and source.package not in report.packages:
            try:
                report.packages[source.package] = ctx.packages.version(source.package)
            except NotInstalled:
                report.packages[source.package] = None
    ctx.packages.save()
    report.seconds = time.perf_counter() - t0
    return report


# ---------------------------------------------------------------- --fix-lines

def fix_lines(kb, report: Report, refused: list | None = None) -> list:
    """Rewrite the `lines:` value of every wrong-lines quote in place; returns the files changed.

    Only the characters of each `lines` value change: comments, key order, quoting and
    layout stay as they were. Each file is written atomically (temp file + rename).
    A file that cannot be edited safely (YAML anchors or aliases, which would make one
    edit change several quotes; a file that does not parse; an edit whose result would
    not load back as the same quotes with the new lines; a folder that cannot be
    written) is left as it was, and (path, reason) goes to `refused`.
    """
    import yaml

    from kb_tools.core.load import read_kb_text, yaml_line_loader
    from kb_tools.core.util import write_atomic
    _, loader = yaml_line_loader()
    refused = [] if refused is None else refused
    base = os.path.dirname(kb.root)
    todo = {}
    for d in report.defects:
        if d.kind == "wrong-lines" and d.found:
            todo.setdefault(d.path, {})[d.quote] = d.found
    changed = []
    for rel, fixes in todo.items():
        path = os.path.join(base, rel)
        try:
            text = read_kb_text(path)
            if any(getattr(ev, "anchor", None) or isinstance(ev, yaml.AliasEvent)
                   for ev in yaml.parse(text, Loader=loader)):
                refused.append((rel, "it uses YAML anchors or aliases; fix the lines by hand"))
                continue
            root = yaml.compose(text, Loader=loader)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            refused.append((rel, f"it cannot be read as YAML ({str(exc).splitlines()[0]})"))
            continue
        edits = []
        items = _mapping_get(root, "quotes")
        for item in (items.value if isinstance(items, yaml.SequenceNode) else []):
            qid = _mapping_get(item, "id")
            if not isinstance(qid, yaml.ScalarNode) or qid.value not in fixes:
                continue
            first, last = fixes[qid.value]
            node = _mapping_get(item, "lines")
            if isinstance(node, yaml.SequenceNode) and len(node.value) == 2 and not node.flow_style:
                for child, value in zip(node.value, (first, last)):   # block list: keep it a block list
                    edits.append((child.start_mark.index, child.end_mark.index, str(value)))
            elif node is not None:
                new = str(first) if (isinstance(node, yaml.ScalarNode) and first == last) else f"[{first}, {last}]"
                edits.append((node.start_mark.index, node.end_mark.index, new))
        if not edits:
            continue
        before = text
        for start, end, new in sorted(edits, reverse=True):
            text = text[:start] + new + text[end:]
        if not _same_but_lines(before, text, fixes, loader):
            refused.append((rel, "the edit would not load back as the same quotes; fix the lines by hand"))
            continue
        try:
            write_atomic(path, text)
        except OSError as exc:
            refused.append((rel, f"it cannot be written ({exc.strerror or exc})"))
            continue
        changed.append(rel)
    return changed


def _same_but_lines(before: str, after: str, fixes: dict, loader) -> bool:
    """Whether `after` parses to the quotes of `before` with only the `lines` in `fixes` changed."""
    import yaml

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if not str(k).startswith("__")}
        return [plain(v) for v in value] if isinstance(value, list) else value
    try:
        old, new = plain(yaml.load(before, Loader=loader)), plain(yaml.load(after, Loader=loader))
    except yaml.YAMLError:
        return False
    if not (isinstance(old, dict) and isinstance(new, dict) and isinstance(new.get("quotes"), list)
            and len(old.get("quotes") or []) == len(new["quotes"])):
        return False
    for was, now in zip(old["quotes"], new["quotes"]):
        fix = fixes.get(was.get("id")) if isinstance(was, dict) else None
        if fix is not None:
            lines = now.get("lines")
            if (lines if isinstance(lines, list) else [lines, lines]) != list(fix):
                return False
            was, now = {**was, "lines": None}, {**now, "lines": None}
        if was != now:
            return False
    return {k: v for k, v in old.items() if k != "quotes"} == {k: v for k, v in new.items() if k != "quotes"}


def _mapping_get(node, key):
    import yaml
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None
