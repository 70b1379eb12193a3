"""The knowledge base's data model: entries, quotes, sources and load problems.

Plain slotted classes rather than dataclasses: this module sits on the search
path, and importing `dataclasses` (and through it `inspect`) would cost more
start-up time than the whole search.
"""
from __future__ import annotations

AREAS = (
    "triage", "wiring", "optimizer", "loss", "numerics",
    "data", "finetune", "instrument", "distributed",
)
SNIPPET_KINDS = ("reproduces", "diagnostic")
LAUNCHERS = ("python", "torchrun")
SOURCE_KINDS = ("primary", "secondary")


class _Record:
    """Field-by-field construction, equality and dict round-trip for the cache."""

    __slots__ = ()

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.pop(name, None))
        if fields:
            raise TypeError(f"{type(self).__name__}: unknown fields {sorted(fields)}")

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other):
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"{type(self).__name__}(id={getattr(self, 'id', '?')!r})"


class Entry(_Record):
    """One debugging entry: symptom -> cause -> fix, with a snippet that proves it.

    `path` is relative to the KB root's parent for messages; `lines` maps each
    top-level field to the 1-based line of its key, and `snippet_line` is the
    file line that holds the snippet's first line (for test failures).
    """

    __slots__ = (
        "id", "title", "area", "tags", "aliases", "symptoms", "cause", "fix",
        "check", "caveats", "correction", "see_also", "evidence",
        "snippet_kind", "snippet_note", "launch", "snippet", "figures",
        "path", "lines", "snippet_line",
    )
    id: str
    title: str
    area: str
    tags: list
    aliases: list
    symptoms: list
    cause: str
    fix: str
    check: str
    caveats: str
    correction: str | None
    see_also: list
    evidence: list          # citations: [{"quote": quote id, "supports": why it backs this entry}]
    snippet_kind: str
    snippet_note: str | None
    launch: str
    snippet: str
    figures: dict           # name -> value string the prose restates and the CPU snippet prints
    path: str
    lines: dict
    snippet_line: int

    @property
    def quote_ids(self) -> list:
        """The ids of the quotes the entry cites, in its order."""
        return [c["quote"] for c in self.evidence or ()]


class Quote(_Record):
    """A verbatim quote, tied to a source and to where in it the words are.

    Cached sources are cited by `lines` (first, last; 1-based, inclusive);
    installed-package sources by `object` (a dotted path whose docstring holds it).
    """

    __slots__ = ("id", "text", "source", "lines", "object", "themes", "short", "author", "path", "line")
    id: str
    text: str
    source: str
    lines: list | None
    object: str | None
    themes: list
    short: bool
    author: str | None      # whom the quote is presented as written by; None: the source's author
    path: str
    line: int


class Source(_Record):
    """A cached source under evidence/, described by its front matter.

    `kind` is "primary" (the author's own published words) or "secondary" (someone
    else's retelling; `retells` then names the primary work: title, author, url).
    `author` always wrote the text in this file. Provenance is a git repository
    (`repo`, `commit`, `repo_path`: the front matter's `path`), a web page (`url`,
    `retrieved`) or an installed package (`package`, `version`); `sha256` is the hash
    of the body's UTF-8 bytes (everything below the front matter's closing `---`).
    """

    __slots__ = (
        "id", "title", "author", "kind", "retells", "url", "published", "retrieved", "coverage",
        "repo", "commit", "repo_path",
        "package", "version", "sha256", "note", "path", "body_line",
    )
    id: str
    title: str
    author: str
    kind: str
    retells: dict | None    # secondary only: {"title", "author", "url"} of the retold work
    repo: str | None        # owner/name of the git repository the body was captured from
    commit: str | None      # 40-hex commit of that capture
    repo_path: str | None   # the file's path in that repository (front matter `path:`)
    url: str
    published: str
    retrieved: str
    coverage: str
    package: str | None     # an installed package whose docstrings the cache holds
    version: str | None     # the package version the cache was taken from
    sha256: str | None
    note: str | None        # how the cache was made (what was left out or restored)
    path: str
    body_line: int


class Problem(_Record):
    """One thing wrong with the KB, printed as `path:line: CODE field: message`."""

    __slots__ = ("path", "line", "code", "field", "message")

    def __str__(self):
        where = f"{self.path}:{self.line}" if self.line else self.path
        field = f" {self.field}:" if self.field else ""
        return f"{where}: {self.code}{field} {self.message}"


class KB:
    """A loaded knowledge base: everything in it, plus what was wrong with it."""

    __slots__ = ("root", "entries", "quotes", "sources", "problems", "aliases", "synonyms")

    def __init__(self, root, entries, quotes, sources, problems, synonyms=()):
        self.root = root
        self.entries = entries      # id -> Entry, in file order
        self.quotes = quotes        # id -> Quote
        self.sources = sources      # id -> Source
        self.problems = problems    # list of Problem
        self.synonyms = list(synonyms)  # groups of interchangeable search terms
        self.aliases = {a.lower(): e.id for e in entries.values() for a in (e.aliases or ())}

    def resolve(self, name: str) -> Entry | None:
        """An entry by id or alias (aliases are case-insensitive: `o12` finds O12)."""
        if name in self.entries:
            return self.entries[name]
        target = self.aliases.get(name.lower())
        return self.entries.get(target) if target else None
