"""The knowledge base's data model: entries, quotes, sources and load problems.

Plain slotted classes rather than dataclasses: this module sits on the search
path, and importing `dataclasses` (and through it `inspect`) would cost more
start-up time than the whole search.
"""
from __future__ import annotations

# The areas, in the order readers meet them: (title, one line on what belongs there).
AREA_INFO = {
    "triage": ("Triage", "Process checks for the first hour with a run that misbehaves."),
    "wiring": ("Training loop wiring", "The training loop itself: what is connected to what, and in which order."),
    "optimizer": ("Optimizer", "Learning rate, schedules, weight decay, accumulation and optimizer state."),
    "loss": ("Loss functions", "Loss-function traps: what each loss expects as input and target."),
    "numerics": ("Numerics", "NaN and inf, reduced precision, exploding and vanishing signals, dead units."),
    "data": ("Data", "The input pipeline, labels, leakage and preprocessing."),
    "finetune": ("Fine-tuning", "Transfer learning, parameter-efficient tuning and LLM fine-tuning."),
    "instrument": ("Instrumentation", "What to log so that failures become visible."),
    "distributed": ("Distributed", "Several processes and several GPUs."),
}
AREAS = tuple(AREA_INFO)
SNIPPET_KINDS = ("reproduces", "diagnostic")
LAUNCHERS = ("python", "torchrun")
SOURCE_KINDS = ("primary", "secondary")


# Every diagnostic `kb check` and `kb verify` print, by stable code: (name, what it means).
# This is the one list: the loader and the verifier refuse a code that is not here, and
# CONTRIBUTING.md's tables are generated from it (`python scripts/generate_docs.py`).
CHECK_CODES = {
    "KB001": ("unreadable-file", "The file is not valid YAML (a duplicate key included), or cannot be read: not a regular file, too large, not UTF-8."),
    "KB002": ("wrong-shape", "The file's top level has the wrong shape (an entry is a mapping; a quote file maps `quotes` to a list)."),
    "KB003": ("missing-field", "A required field is missing."),
    "KB004": ("bad-value", "A field has the wrong type, is empty or is too long."),
    "KB005": ("unknown-field", "A field name is not part of the schema (often a typo)."),
    "KB006": ("id-not-file-name", "An entry's `id` differs from its file name."),
    "KB007": ("duplicate-id", "Two entries or two quotes share an id."),
    "KB008": ("value-not-allowed", "A field holds a value outside its allowed set (area, snippet_kind, launch, coverage, kind)."),
    "KB009": ("wrong-folder", "An entry sits in a folder other than its `area`."),
    "KB010": ("unknown-see-also", "`see_also` names an entry that does not exist, or the entry itself."),
    "KB011": ("unknown-quote", "`evidence` names a quote that does not exist."),
    "KB012": ("alias-clash", "An alias is used by two entries, equals an entry's id (its own included), or is listed twice."),
    "KB013": ("too-few-symptoms", "An entry lists fewer than three symptoms."),
    "KB014": ("missing-source-file", "A quote names a source that has no file under evidence/."),
    "KB015": ("bad-citation", "A quote's citation is malformed: `lines` must be [first, last] within the file, or `object` a dotted path, not both."),
    "KB016": ("no-front-matter", "A file under evidence/ has no front matter between `---` lines."),
    "KB017": ("id-not-kebab-case", "An id (of an entry, a quote or a source file) is not kebab-case (lower-case letters, digits and single hyphens)."),
    "KB018": ("diagnostic-without-note", "A diagnostic snippet has no `snippet_note` saying why the bug itself is not reproduced."),
    "KB019": ("bad-synonyms", "`synonyms.yaml` is not a mapping of `groups` to lists of two or more words or phrases."),
    "KB020": ("retells-mismatch", "A secondary source has no `retells` (title, author, url of the work it retells), or a primary source has one."),
    "KB021": ("incomplete-provenance", "A source's provenance is incomplete: `repo` needs `commit` and `path`, and a web page needs `retrieved`."),
    "KB022": ("malformed-provenance", "A provenance value is malformed: `repo` is owner/name, `commit` 40 hex digits, `sha256` 64 hex digits."),
    "KB023": ("bad-evidence-item", "An `evidence` item is not a mapping of `quote` (an id) and `supports` (one line saying why it backs the entry)."),
    "KB024": ("site-name-clash", "An id or alias cannot name a page of the docs site: `index` as an entry or source id, an alias equal to one of the site's own pages, or an alias with characters other than letters, digits, '.', '_' and '-'."),
    "KB025": ("dead-mention", "Prose names an entry that does not exist: a code span holding only a kebab-case word (`lr-too-low`), or a kebab-case word after `see`, that is no entry's id or alias."),
    "KB026": ("unknown-tag", "A tag is not in the KB's vocabulary `kb/tags.yaml` (the nearest tag is suggested), or the vocabulary is missing or malformed: it maps each kebab-case tag to a one-line meaning."),
    "KB027": ("hidden-character", "An entry's title or a symptom holds a character that shows as nothing or reorders the text around it: zero-width (U+200B to U+200D, U+2060, U+FEFF) or a bidirectional control (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069). Ids, aliases and tags allow only plain characters already (KB017, KB024, KB026)."),
    "KB028": ("evidence-note-with-evidence", "An entry has an `evidence_note` (why no quote backs it, and where was searched) but also cites quotes in `evidence`: the note is only for an entry with none."),
    "KB029": ("fix-pair-harness", "Both sides of `fix_pair` do nothing but call functions the snippet defines, one of them on both sides (`train(\"sgd\", 0.5)` -> `train(\"sgd\", 0.05)`, `run(raw)` -> `run(normalize(raw))`): a switch of the snippet's harness, where the reader needs the lines they write in their own code."),
}
# `kb verify`'s defect kinds, most basic first: a quote gets only the first that applies.
VERIFY_CODES = {
    "KB101": ("unknown-source", "The source id has no file under `evidence/` (a typo: the nearest id is suggested), or the object is not in the installed package."),
    "KB102": ("wrong-author", "The quote's `author:` is not the author of its source's text (for a secondary source: the message says whose retelling it is)."),
    "KB103": ("unchecked", "The package is not installed here; reported apart from failures, fails only with `--strict`."),
    "KB104": ("not-found", "No passage of the source is close to the quote."),
    "KB105": ("words-changed", "A passage matches except for swapped, added or dropped words (listed)."),
    "KB106": ("out-of-order", "The parts joined by `[...]` are all in the source, but in another order."),
    "KB107": ("truncated", "The quote stops mid-sentence without an elision mark (`[...]`, `...`, `…`)."),
    "KB108": ("too-short", "Fewer than 6 words; mark the quote `short: true` if the phrase itself is the point."),
    "KB109": ("wrong-lines", "The words are in the source, but not on the cited lines (for a package quote: in another object)."),
    "KB110": ("cache-changed", "About a source, not a quote: the cached file's body no longer hashes to the `sha256` recorded at capture (reported at its `sha256:` line, with the source id where a quote id would be)."),
}
CODES = {**CHECK_CODES, **VERIFY_CODES}
KIND_CODES = {name: code for code, (name, _) in VERIFY_CODES.items()}  # defect kind -> its code
# The first-hour checklist, in the order to work through it (the site's home page, SKILL.md).
TRIAGE_PATH = (
    "overfit-one-batch", "init-loss-check", "input-independent-baseline", "batch-independence-check",
    "visualize-model-input", "fixed-seed", "metric-stuck", "compare-reference-implementation",
)
# Top-level names of the docs site: an alias is served as /ALIAS/, so it may not be one of these.
SITE_PAGES = frozenset({
    "index.md", "404.html", "entries", "areas", "sources", "symptoms", "tags", "folklore",
    "assets", "search", "stylesheets", "sitemap.xml", "sitemap.xml.gz", "symptoms.md", "tags.md",
    "folklore.md",
})


def format_diagnostic(path: str, line, code: str, subject: str, message: str) -> str:
    """The one line every diagnostic prints as, like a linter: `path:line: CODE subject: message`."""
    where = f"{path}:{line}" if line else path
    return f"{where}: {code}{f' {subject}:' if subject else ''} {message}"


class _Record:
    """Field-by-field construction, equality and dict round-trip for the cache.

    Every field must be given (None where it is empty): a record cached before a field was
    added is refused with a TypeError, which makes the cache rebuild, instead of serving None."""

    __slots__ = ()

    def __init__(self, **fields):
        missing = [name for name in self.__slots__ if name not in fields]
        if missing:
            raise TypeError(f"{type(self).__name__}: missing fields {missing}")
        for name in self.__slots__:
            setattr(self, name, fields.pop(name))
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
        "id", "title", "area", "tags", "aliases", "symptoms", "cause", "fix", "fix_pair",
        "check", "caveats", "correction", "see_also", "evidence", "evidence_note",
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
    fix_pair: dict | None   # {"before": code, "after": code}: the lines the fix changes, both in the snippet
    check: str
    caveats: str
    correction: str | None
    see_also: list
    evidence: list          # citations: [{"quote": quote id, "supports": why it backs this entry}]
    evidence_note: str | None  # only with no evidence: why no quote backs the entry, and where was searched
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

    def __init__(self, **fields):
        super().__init__(**fields)
        if self.code not in CHECK_CODES:
            raise ValueError(f"unknown problem code {self.code!r}: add it to CHECK_CODES first")

    def __str__(self):
        return format_diagnostic(self.path, self.line, self.code, self.field, self.message)


class KB:
    """A loaded knowledge base: everything in it, plus what was wrong with it."""

    __slots__ = ("root", "entries", "quotes", "sources", "problems", "aliases", "synonyms", "vocabulary")

    def __init__(self, root, entries, quotes, sources, problems, synonyms=(), vocabulary=None):
        self.root = root
        self.entries = entries      # id -> Entry, in file order
        self.quotes = quotes        # id -> Quote
        self.sources = sources      # id -> Source
        self.problems = problems    # list of Problem
        self.synonyms = list(synonyms)  # groups of interchangeable search terms
        self.vocabulary = dict(vocabulary or {})  # allowed tag -> its one-line meaning (kb/tags.yaml)
        self.aliases = {a.lower(): e.id for e in entries.values() for a in (e.aliases or ())}

    def resolve(self, name: str) -> Entry | None:
        """An entry by id or alias (aliases are case-insensitive: `o12` finds O12)."""
        if name in self.entries:
            return self.entries[name]
        target = self.aliases.get(name.lower())
        return self.entries.get(target) if target else None

    def entry_named(self, name) -> Entry:
        """The entry named by id or alias; a KBError with a did-you-mean otherwise. The one resolver
        every command and the MCP server use."""
        from kb_tools.core.util import KBError, did_you_mean
        entry = self.resolve(name) if isinstance(name, str) else None
        if entry is None:
            raise KBError(f"unknown entry '{name}'{did_you_mean(str(name), list(self.entries) + list(self.aliases))}")
        return entry
