"""Parse and validate a knowledge base (found by locate.py); cache the result.

Every problem is collected (never the first one only) and carries a stable code
so users can look it up the way they look up a linter's rule. Parsing YAML is the
slowest step of a search, so a validated KB is cached and reused until any file
under the KB or its evidence changes (size, mtime, ctime or inode: a write always
moves ctime, so an edited file is never served stale).
"""
from __future__ import annotations

import os

from kb_tools.core import cache
from kb_tools.core.locate import (EVIDENCE_FILES, SYNONYMS_FILE, TAGS_FILE, YAML_FILES, evidence_dir, find_kb_root, kb_signature,
                     scan_files)
from kb_tools.core.model import AREAS, KB, LAUNCHERS, SITE_PAGES, SNIPPET_KINDS, SOURCE_KINDS, Entry, Problem, Quote, Source
from kb_tools.core.util import PROSE_FIELDS, dead_mentions, did_you_mean, is_hex, is_kebab_id, read_regular

# Size caps: a KB file, one text field, one list item (a symptom, a tag), a snippet.
MAX_FILE_BYTES = 4 << 20
MAX_TEXT_CHARS, MAX_ITEM_CHARS, MAX_SNIPPET_CHARS = 20_000, 2_000, 200_000

# The schema: field -> (kind, required, meaning). `kind` is what the loader checks (str,
# list of str, an allowed tuple, or a named structure); `required` is "yes", "yes (may be
# empty)" (the key must be there, `[]` allowed) or says when the field is optional. The
# field tables of CONTRIBUTING.md are generated from these (scripts/generate_docs.py).
ENTRY_FIELDS = {
    "id": ("str", "yes", "same as the file stem: kebab-case, stable, never reused"),
    "title": ("str", "yes", "one line, names the bug, not the symptom"),
    "area": (AREAS, "yes", "the area, and the folder the file sits in"),
    "tags": ("list", "yes", "what the entry is about, from the vocabulary in `kb/tags.yaml` (tag: one-line meaning); a new tag goes there first, and only when two or more entries share it"),
    "aliases": ("list", "yes (may be empty)", "other names, e.g. the seed catalogue's `O12`; unique across the KB, and usable as a page name (`/O12/`)"),
    "symptoms": ("list", "yes, at least 3", "what a user sees, in their words: the curve, the log line, the exact torch error text, and one long description of a whole run"),
    "cause": ("str", "yes", "the mechanism"),
    "fix": ("str", "yes", "the exact code change or knob"),
    "fix_pair": ("fix_pair", "no (expected)", "`{before: ..., after: ...}`: the few lines (1 to 8 each, block scalars) the fix changes, as the reader would type them; each side must appear in the snippet line for line (indentation aside), so the pair is code the snippet runs, and at least one side must be real code, not only calls of the snippet's own functions (KB029); the site shows it at the top of the entry page"),
    "check": ("str", "yes", "the cheapest test that separates this cause from its look-alikes (name them)"),
    "caveats": ("str", "yes", "where the advice does not hold"),
    "correction": ("str", "no", "where common folklore is wrong on current torch, what is true instead"),
    "see_also": ("list", "yes (may be empty)", "related entries; every id must exist"),
    "evidence": ("citations", "yes (may be empty)", "quotes from `kb/quotes/` that back the entry: `- quote: ID` with `supports:`, one line (at most 200 characters, the project's own words) saying why it backs this entry's cause or fix; the site shows it under the quote"),
    "evidence_note": ("str", "no", "why the entry has no quote after a search, and where was searched (library docs and source, the threads that resolved the bug, papers); only with an empty `evidence`; the site shows it under Evidence"),
    "snippet_kind": (SNIPPET_KINDS, "yes", "`reproduces`: the snippet shows the bug and the fix; `diagnostic`: it plants the bug and shows the check catches it"),
    "snippet_note": ("str", "only for `diagnostic`", "why the bug itself cannot be reproduced here"),
    "launch": (LAUNCHERS, "no (default `python`)", "`torchrun`: the snippet is started as `torchrun --nproc-per-node 2 snippet.py`"),
    "snippet": ("str", "yes", "the program (a block scalar, `|`); rules below"),
    "figures": ("figures", "no", "every number measured by the snippet that the text restates, by name: `{dead_units: \"58%\"}`; names snake_case, values exactly as the snippet prints them; rules below"),
}
QUOTE_FIELDS = {
    "id": ("str", "yes", "unique across the KB, kebab-case"),
    "text": ("str", "yes", "the verbatim words; `[...]`, `...` or `…` mark an elision, other square brackets the editor's words"),
    "source": ("str", "yes", "the id of a source under evidence/ (its file stem)"),
    "lines": ("lines", "one of `lines`, `object`", "`[first, last]`: 1-based, inclusive, the cached file's own lines"),
    "object": ("str", "one of `lines`, `object`", "for an installed package's source: the dotted path whose docstring (or, for a function, source messages) holds the text"),
    "themes": ("list", "yes", "what the quote is about, in a word or two (the site's /folklore/ groups quotes by the area of the first entry they back)"),
    "short": ("bool", "no", "`true` lets a quote have fewer than six words, when the phrase itself is the point"),
    "author": ("str", "no", "whom the site presents as the author; must be the source's `author`"),
}
SOURCE_FIELDS = {
    "title": ("str", "yes", "the work's title"),
    "author": ("str", "yes", "who wrote the text in this file"),
    "kind": (SOURCE_KINDS, "yes", "`primary`: the author's own published words; `secondary`: someone else's retelling"),
    "retells": ("mapping", "only for `secondary`", "`{title, author, url}` of the work retold"),
    "url": ("str", "yes", "canonical, human-readable address"),
    "published": ("str", "yes", "publication date, or `unknown`"),
    "retrieved": ("str", "for a web page", "`YYYY-MM-DD` the page was captured"),
    "coverage": (("full", "excerpt"), "yes", "whether the body is the whole text or excerpts (each kept line unchanged)"),
    "repo": ("str", "for a git capture", "`owner/name` of the repository the body was captured from"),
    "commit": ("str", "for a git capture", "the 40-hex commit of that capture"),
    "path": ("str", "for a git capture", "the file's path in the repository"),
    "package": ("str", "for a package's docs", "the installed package whose docstrings the body holds, e.g. `torch`"),
    "version": ("str", "for a package's docs", "the package version the body was taken from"),
    "sha256": ("str", "no", "hex sha256 of the body's UTF-8 bytes (everything below the closing `---`); `kb verify` reports `cache-changed` when it differs"),
    "note": ("str", "no", "how the copy was made"),
}


def required(spec_item) -> bool:
    """Whether the loader insists on the key: "yes" and "yes (may be empty)" fields."""
    return spec_item[1].startswith("yes")


# Characters that show as nothing or reorder the text around them: zero-width ones and the
# bidirectional controls. In a title or a symptom they make one line read as another (a right-to-left
# override turns "nan si" into "is nan") or split a word search would match (KB027).
HIDDEN_CHARS = frozenset("\u061c\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"
                         "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
ONE_LINE_FIELDS = ("title", "symptoms")  # id, aliases and tags allow only plain characters already

RETELLS_FIELDS = ("title", "author", "url")
EVIDENCE_FIELDS = ("quote", "supports")
SUPPORTS_MAX = 200  # characters: `supports` is one short line


# ---------------------------------------------------------------- caching

def load_kb(kb_root: str | None = None, use_cache: bool = True) -> KB:
    """Load and validate the KB at `kb_root` (see find_kb_root), from cache when unchanged."""
    root = find_kb_root(kb_root)
    if not use_cache or not cache.enabled():
        return _parse(root, evidence_dir(root))
    signature = kb_signature(root)
    path = cache.path_for(root, "kb")
    data = cache.read_value(path, signature)
    if data is not None:
        try:
            return _from_plain(root, data)
        except (KeyError, TypeError, ValueError):
            pass  # written by an older layout: rebuild
    kb = _parse(root, evidence_dir(root))
    cache.write_value(path, signature, _to_plain(kb))
    return kb


def _to_plain(kb: KB) -> dict:
    return {
        "entries": [e.to_dict() for e in kb.entries.values()],
        "quotes": [q.to_dict() for q in kb.quotes.values()],
        "sources": [s.to_dict() for s in kb.sources.values()],
        "problems": [p.to_dict() for p in kb.problems],
        "synonyms": kb.synonyms,
        "vocabulary": kb.vocabulary,
    }


def _from_plain(root: str, data: dict) -> KB:
    return KB(
        root,
        {d["id"]: Entry(**d) for d in data["entries"]},
        {d["id"]: Quote(**d) for d in data["quotes"]},
        {d["id"]: Source(**d) for d in data["sources"]},
        [Problem(**d) for d in data["problems"]],
        data["synonyms"],
        data["vocabulary"],
    )


# ---------------------------------------------------------------- parsing

def yaml_line_loader():
    """A YAML loader (libyaml when available) that records the line of every mapping key."""
    import yaml
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class LineLoader(base):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode) and not any(k.tag == "tag:yaml.org,2002:merge"
                                                              for k, _ in node.value):
                seen = {}
                for key_node, _ in node.value:
                    if isinstance(key_node, yaml.ScalarNode):
                        if key_node.value in seen:
                            raise yaml.constructor.ConstructorError(
                                None, None, f"duplicate key '{key_node.value[:80]}' (first on line "
                                f"{seen[key_node.value]})", key_node.start_mark)
                        seen[key_node.value] = key_node.start_mark.line + 1
            mapping = super().construct_mapping(node, deep=deep)
            lines, items, blocks = {}, {}, {}
            for key_node, value_node in node.value:
                key = key_node.value
                lines[key] = key_node.start_mark.line + 1
                if isinstance(value_node, yaml.SequenceNode):
                    items[key] = [n.start_mark.line + 1 for n in value_node.value]
                elif isinstance(value_node, yaml.ScalarNode) and value_node.style in ("|", ">"):
                    blocks[key] = value_node.start_mark.line + 2  # content starts below the indicator
            mapping["__line__"] = node.start_mark.line + 1
            mapping["__lines__"], mapping["__items__"], mapping["__blocks__"] = lines, items, blocks
            return mapping

    return yaml, LineLoader


class _Collector:
    def __init__(self, base: str):
        self.base = base
        self.problems = []
        self.skipped = []  # (path, reason) of what the folder scans passed over
        self.line_counts = {}  # source id -> lines in its file, for checking `lines`

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.base)

    def add(self, path, line, code, field, message):
        self.problems.append(Problem(path=path, line=line, code=code, field=field, message=message))


def _shown(value) -> str:
    """A field's value for a message: text (cut short), else only its type."""
    return value[:60] if isinstance(value, str) else f"a {type(value).__name__}"


def _check_fields(data: dict, spec: dict, path: str, col: _Collector, kind: str) -> set:
    """Required, typed, known and size-capped fields, against a spec of ENTRY/QUOTE/SOURCE_FIELDS.
    Returns the names of the fields that failed, so no invalid value reaches the KB."""
    bad = set()
    lines = data.get("__lines__", {})

    def at(field: str) -> int:
        return lines.get(field, data.get("__line__", 1))
    for field, value in data.items():
        if not isinstance(field, str):  # `1: x` or `true: x` loads with a non-text key
            col.add(path, at(str(field)), "KB005", str(field), f"unknown {kind} field (a field name is a word)")
            continue
        if field.startswith("__"):
            continue
        if field not in spec:
            col.add(path, at(field), "KB005", field, f"unknown {kind} field{did_you_mean(field, spec)}")
            continue
        expected = spec[field][0]
        bad.add(field)
        cap = MAX_SNIPPET_CHARS if field == "snippet" else MAX_TEXT_CHARS
        if value is None:
            col.add(path, at(field), "KB004", field, "is empty")
        elif expected == "str" and not (isinstance(value, str) and value.strip()):
            col.add(path, at(field), "KB004", field, f"must be non-empty text, got {type(value).__name__}")
        elif expected == "list" and not (isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)):
            col.add(path, at(field), "KB004", field, "must be a list of non-empty strings")
        elif expected == "str" and len(value) > cap:
            col.add(path, at(field), "KB004", field, f"is too long ({len(value)} characters; at most {cap})")
        elif expected == "list" and any(len(v) > MAX_ITEM_CHARS for v in value):
            col.add(path, at(field), "KB004", field, f"has an item over {MAX_ITEM_CHARS} characters")
        elif expected == "bool" and not isinstance(value, bool):
            col.add(path, at(field), "KB004", field, "must be true or false")
        elif expected == "figures" and _figures_problem(value):
            col.add(path, at(field), "KB004", field, _figures_problem(value))
        elif expected == "fix_pair" and _fix_pair_problem(value):
            col.add(path, at(field), "KB004", field, _fix_pair_problem(value))
        elif expected == "mapping" and not isinstance(value, dict):
            col.add(path, at(field), "KB004", field, "must be a mapping of fields")
        elif isinstance(expected, tuple) and not (isinstance(value, str) and value in expected):
            hint = did_you_mean(value, expected) if isinstance(value, str) else ""
            col.add(path, at(field), "KB008", field,
                    f"'{_shown(value)}' is not one of: {', '.join(expected)}{hint}")
        else:
            bad.discard(field)
    for field, item in spec.items():
        if required(item) and field not in data:
            col.add(path, data.get("__line__", 1), "KB003", field, f"missing required {kind} field")
    return bad


def _hidden_characters(data: dict, path: str, col: _Collector, bad: set) -> set:
    """KB027 for each one-line field of an entry (or item of one) holding a HIDDEN_CHARS character;
    returns the fields that failed. Fields that already failed their type check are skipped."""
    import unicodedata
    failed = set()
    for field in ONE_LINE_FIELDS:
        value = data.get(field)
        if field in bad or value is None:
            continue
        lines = data["__items__"].get(field) if isinstance(value, list) else None
        for n, text in enumerate(value if isinstance(value, list) else [value]):
            hidden = next((c for c in text if c in HIDDEN_CHARS), None)
            if hidden is None:
                continue
            at = lines[n] if lines else data["__lines__"].get(field, 1)
            col.add(path, at, "KB027", field, f"holds U+{ord(hidden):04X} {unicodedata.name(hidden, '')}, "
                                              f"which shows as nothing or reorders the text; remove it")
            failed.add(field)
    return failed


def read_kb_text(path: str) -> str:
    """A KB file's text: a regular file of at most MAX_FILE_BYTES, in UTF-8.
    Raises OSError, ValueError (too large) or UnicodeDecodeError."""
    return read_regular(path, MAX_FILE_BYTES).decode("utf-8")


def _figures(value) -> dict:
    """An entry's `figures` mapping without the line bookkeeping the loader adds to every mapping."""
    return {k: v for k, v in value.items() if not (isinstance(k, str) and k.startswith("__"))} \
        if isinstance(value, dict) else {}


def _figures_problem(value) -> str | None:
    """Why `figures` is malformed: it maps snake_case names to the quoted text the snippet prints."""
    if not isinstance(value, dict) or not _figures(value):
        return "must map figure names to values, e.g. `dead_units: \"58%\"`"
    for name, figure in _figures(value).items():
        if not (isinstance(name, str) and name[:1].isalpha() and name.isascii()
                and name.replace("_", "").isalnum() and name == name.lower()):
            return f"'{name}' is not a snake_case figure name"
        if not (isinstance(figure, str) and figure.strip() and figure == figure.strip() and "\n" not in figure):
            return f"'{name}' must be one line of quoted text as the snippet prints it, got {figure!r}"
    return None


FIX_PAIR_SIDES, FIX_PAIR_MAX_LINES = ("before", "after"), 8


def _fix_pair_problem(value) -> str | None:
    """Why `fix_pair` is malformed: a mapping of `before` and `after`, each 1 to 8 lines of code."""
    if not isinstance(value, dict):
        return "must be a mapping of `before:` and `after:` (the lines the fix changes)"
    keys = [k for k in value if not (isinstance(k, str) and k.startswith("__"))]
    if sorted(map(str, keys)) != sorted(FIX_PAIR_SIDES):
        return f"must have exactly `before:` and `after:`, got {', '.join(map(str, keys)) or 'nothing'}"
    for side in FIX_PAIR_SIDES:
        code = value[side]
        if not (isinstance(code, str) and code.strip()):
            return f"`{side}` must be non-empty code"
        n = len(code.strip("\n").splitlines())
        if n > FIX_PAIR_MAX_LINES:
            return f"`{side}` has {n} lines; at most {FIX_PAIR_MAX_LINES} (show the change, the snippet has the rest)"
    if value["before"].strip() == value["after"].strip():
        return "`before` and `after` are the same code"
    return None


def fix_pair_lines(code: str) -> list:
    """A side of a fix pair (or a snippet) as lines without indentation or trailing blanks."""
    return [line.strip() for line in code.strip("\n").splitlines()]


def missing_fix_pair_side(pair: dict, snippet: str) -> str | None:
    """The side of `pair` whose lines are not consecutive lines of `snippet` (indentation aside)."""
    lines = fix_pair_lines(snippet)
    for side in FIX_PAIR_SIDES:
        want = fix_pair_lines(pair[side])
        if not any(lines[i:i + len(want)] == want for i in range(len(lines) - len(want) + 1)):
            return side
    return None


def _helper_call(stmt, helpers: set):
    """The call of `stmt` (`x = f(...)`, `f(...)`) when `f` is a function the snippet defines."""
    import ast
    value = getattr(stmt, "value", None)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):  # `[f(x, flag=True) for x in data]`
        value = value.elt
    if isinstance(stmt, (ast.Assign, ast.Expr, ast.AnnAssign)) and isinstance(value, ast.Call) \
            and isinstance(value.func, ast.Name) and value.func.id in helpers:
        return value
    return None


def harness_toggle(pair: dict, snippet: str) -> str | None:
    """The snippet's own function when both sides of `pair` do nothing but call the snippet's own
    functions, one of them on both sides (`train("sgd", 0.5)` -> `train("sgd", 0.05)`,
    `run(raw)` -> `run(normalize(raw))`): a switch of the test harness, not the code a user writes.
    None when a side shows real code (or does not parse)."""
    import ast
    import textwrap
    try:
        tree = ast.parse(snippet)
        sides = [ast.parse(textwrap.dedent(pair[side].strip("\n"))).body for side in FIX_PAIR_SIDES]
    except (SyntaxError, ValueError):
        return None
    helpers = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    calls = [[_helper_call(stmt, helpers) for stmt in side] for side in sides]
    if not all(side and all(side) for side in calls):
        return None
    shared = {c.func.id for c in calls[0]} & {c.func.id for c in calls[1]}
    return min(shared) if shared else None


def _read_yaml(path, col, yaml, loader):
    rel = col.rel(path)
    try:
        return yaml.load(read_kb_text(path), Loader=loader)
    except RecursionError:
        col.add(rel, 1, "KB001", "", "invalid YAML: nested too deeply")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        col.add(rel, mark.line + 1 if mark else 1, "KB001", "", f"invalid YAML: {reason}")
    except UnicodeDecodeError as exc:
        col.add(rel, 0, "KB001", "", f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})")
    except ValueError as exc:
        col.add(rel, 0, "KB001", "", f"file too large: {exc}")
    except OSError as exc:
        col.add(rel, 0, "KB001", "", f"cannot read: {exc.strerror or exc}")
    return None


def _parse(root: str, ev_dir: str) -> KB:
    yaml, loader = yaml_line_loader()
    col = _Collector(os.path.dirname(root))
    sources = _parse_sources(ev_dir, col, yaml, loader)
    quotes = _parse_quotes(root, sources, col, yaml, loader)
    entries = _parse_entries(root, quotes, col, yaml, loader)
    synonyms = _parse_synonyms(os.path.join(root, SYNONYMS_FILE), col, yaml, loader)
    vocabulary = _parse_vocabulary(os.path.join(root, TAGS_FILE), entries, col, yaml, loader)
    for path, reason in col.skipped:
        col.add(col.rel(path), 0, "KB001", "", reason)
    return KB(root, entries, quotes, sources, col.problems, synonyms, vocabulary)


def _parse_synonyms(path, col, yaml, loader) -> list:
    """Groups of interchangeable words and phrases for search (optional file)."""
    if not os.path.exists(path):
        return []
    data = _read_yaml(path, col, yaml, loader)
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        col.add(col.rel(path), 1, "KB019", "groups", "expected `groups:` with a list of groups")
        return []
    good = []
    for group, line in zip(groups, data["__items__"].get("groups", [])):
        if isinstance(group, list) and len(group) >= 2 and all(isinstance(w, str) and w.strip() for w in group):
            good.append([w.strip() for w in group])
        else:
            col.add(col.rel(path), line, "KB019", "groups", "each group is a list of two or more words or phrases")
    return good


def _parse_vocabulary(path, entries, col, yaml, loader) -> dict:
    """The tag vocabulary (tag -> meaning), with every entry tag outside it reported (KB026).

    Required once any entry has a tag: a free-for-all of tags is what makes a tag index useless.
    """
    rel = col.rel(path)
    if not os.path.exists(path):
        if any(e.tags for e in entries.values()):
            col.add(rel, 0, "KB026", "tags", f"no tag vocabulary: create {rel} with `tags:` mapping each "
                                             f"allowed tag to a one-line meaning")
        return {}
    data = _read_yaml(path, col, yaml, loader)
    tags = data.get("tags") if isinstance(data, dict) else None
    if not isinstance(tags, dict):
        col.add(rel, 1, "KB026", "tags", "expected `tags:` mapping each tag to a one-line meaning")
        return {}
    vocabulary = {}
    for tag, meaning in tags.items():
        if not isinstance(tag, str) or tag.startswith("__"):
            continue
        line = tags["__lines__"].get(tag, 1)
        if not is_kebab_id(tag):
            col.add(rel, line, "KB026", "tags", f"'{tag}' is not a kebab-case tag (lower-case letters, digits, hyphens)")
        elif not (isinstance(meaning, str) and meaning.strip()) or "\n" in meaning.strip():
            col.add(rel, line, "KB026", "tags", f"'{tag}' needs its meaning: one line of text")
        else:
            vocabulary[tag] = meaning.strip()
    for e in entries.values():
        for tag, line in zip(e.tags, e.lines["__items__"].get("tags", [])):
            if tag not in vocabulary:
                col.add(e.path, line, "KB026", "tags",
                        f"tag '{tag}' is not in the vocabulary ({rel}){did_you_mean(tag, vocabulary)}")
    return vocabulary


def _parse_sources(ev_dir, col, yaml, loader) -> dict:
    sources = {}
    for path in scan_files(ev_dir, EVIDENCE_FILES, col.skipped):
        rel = col.rel(path)
        sid = os.path.splitext(os.path.basename(path))[0]
        if not is_kebab_id(sid):
            col.add(rel, 1, "KB017", "id", f"'{sid}' (the file name is the source id) is not kebab-case")
        elif sid == "index":
            col.add(rel, 1, "KB024", "id", "'index' is the site's page listing the sources; rename the file")
        try:
            text = read_regular(path, MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except ValueError as exc:
            col.add(rel, 0, "KB001", "", f"file too large: {exc}")
            continue
        except OSError as exc:
            col.add(rel, 0, "KB001", "", f"cannot read: {exc.strerror or exc}")
            continue
        head = text.splitlines(keepends=True)[:60]
        col.line_counts[sid] = len(text.splitlines())
        end = next((i for i, line in enumerate(head[1:], 1) if line.rstrip() == "---"), None)
        if not head or head[0].rstrip() != "---" or end is None:
            col.add(rel, 1, "KB016", "", "no front matter (a `---` block with title, author, url, ...)")
            continue
        try:
            meta = yaml.load("".join(head[1:end]), Loader=loader) or {}
        except yaml.YAMLError as exc:
            col.add(rel, 1, "KB001", "", f"invalid YAML in front matter: {getattr(exc, 'problem', exc)}")
            continue
        if not isinstance(meta, dict):
            col.add(rel, 1, "KB002", "", "front matter must be a mapping")
            continue
        meta = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in meta.items()}
        bad = _check_fields(meta, SOURCE_FIELDS, rel, col, "source")
        lines = _front_matter_lines(head[1:end])
        retells = _check_provenance(meta, rel, lines, col)
        fields = {k: None if k in bad else meta.get(k) for k in SOURCE_FIELDS if k not in ("path", "retells")}
        sources[sid] = Source(id=sid, path=rel, body_line=end + 2,
                              repo_path=None if "path" in bad else meta.get("path"), retells=retells, **fields)
    return sources


def _front_matter_lines(head: list) -> dict:
    """The file line of each top-level front-matter key (front matter starts on line 2)."""
    return {line.split(":", 1)[0]: n for n, line in enumerate(head, 2)
            if line[:1].isalpha() and ":" in line}


def _check_provenance(meta: dict, rel: str, lines: dict, col: _Collector):
    """kind/retells agreement, complete provenance and well-formed hashes; returns retells."""
    def at(field: str) -> int:
        return lines.get(field, 1)
    kind, retells = meta.get("kind"), meta.get("retells")
    if kind == "secondary" and retells is None:
        col.add(rel, at("kind"), "KB020", "retells",
                "a secondary source names the work it retells: `retells: {title, author, url}`")
    elif kind == "primary" and retells is not None:
        col.add(rel, at("retells"), "KB020", "retells",
                "only a secondary source retells another work (set `kind: secondary`, or drop `retells`)")
    if isinstance(retells, dict):
        for key in RETELLS_FIELDS:
            if not (isinstance(retells.get(key), str) and retells[key].strip()):
                col.add(rel, at("retells"), "KB020", "retells", f"missing `{key}` of the retold work")
        for key in retells:
            if key not in RETELLS_FIELDS and not (isinstance(key, str) and key.startswith("__")):
                col.add(rel, at("retells"), "KB005", "retells",
                        f"unknown field '{key}' (retells has {', '.join(RETELLS_FIELDS)})")
        retells = {k: retells.get(k) for k in RETELLS_FIELDS}
    else:
        retells = None
    git = [f for f in ("repo", "commit", "path") if meta.get(f) is not None]
    if git and len(git) < 3:
        missing = [f for f in ("repo", "commit", "path") if f not in git]
        col.add(rel, at(git[0]), "KB021", missing[0],
                f"a capture from a git repository gives `repo`, `commit` and `path`; missing {', '.join(missing)}")
    if not git and meta.get("package") is None and meta.get("retrieved") is None:
        col.add(rel, 1, "KB021", "retrieved",
                "a web page capture gives `retrieved: YYYY-MM-DD` (or give `repo`/`commit`/`path`, or `package`)")
    repo = meta.get("repo")
    if isinstance(repo, str) and (repo.count("/") != 1 or not all(repo.split("/")) or " " in repo):
        col.add(rel, at("repo"), "KB022", "repo", f"'{repo}' is not owner/name")
    for field, digits in (("commit", 40), ("sha256", 64)):
        value = meta.get(field)
        if value is not None and not is_hex(value, digits):
            col.add(rel, at(field), "KB022", field,
                    f"must be {digits} lower-case hex digits, got {str(value)[:48]!r}")
    return retells


def body_offset(data: bytes, body_line: int) -> int:
    """Byte offset where line `body_line` (1-based) of `data` starts: a source's body below its
    front matter. The end of `data` if it has fewer lines."""
    at = 0
    for _ in range(body_line - 1):
        nl = data.find(b"\n", at)
        if nl == -1:
            return len(data)
        at = nl + 1
    return at


def body_sha256(data: bytes, body_line: int) -> str:
    """The hex sha256 a source records: of its body's bytes, everything below the front matter."""
    import hashlib
    return hashlib.sha256(data[body_offset(data, body_line):]).hexdigest()


def _parse_quotes(root, sources, col, yaml, loader) -> dict:
    quotes = {}
    for path in scan_files(os.path.join(root, "quotes"), YAML_FILES, col.skipped):
        rel = col.rel(path)
        data = _read_yaml(path, col, yaml, loader)
        if data is None:
            continue  # an empty file holds no quotes; an unreadable one is already reported
        if not isinstance(data, dict) or not isinstance(data.get("quotes"), list):
            col.add(rel, 1, "KB002", "quotes", "a quote file maps `quotes:` to a list of quotes")
            continue
        for item in data["quotes"]:
            if not isinstance(item, dict):
                col.add(rel, 1, "KB002", "quotes", "each quote must be a mapping")
                continue
            line = item["__line__"]
            bad = _check_fields(item, QUOTE_FIELDS, rel, col, "quote")
            qid = item.get("id")
            if not isinstance(qid, str):
                continue
            if not is_kebab_id(qid):
                col.add(rel, line, "KB017", "id", f"'{qid}' is not kebab-case")
            if qid in quotes:
                col.add(rel, line, "KB007", "id", f"duplicate quote id '{qid}' (first in {quotes[qid].path}:{quotes[qid].line})")
                continue
            src = item.get("source") if "source" not in bad else None
            if isinstance(src, str) and src not in sources:
                col.add(rel, item["__lines__"].get("source", line), "KB014", "source",
                        f"unknown source '{src}'{did_you_mean(src, sources)}")
            lines, obj = item.get("lines"), item.get("object")
            if isinstance(lines, int) and not isinstance(lines, bool):
                lines = [lines, lines]
            obj = obj if "object" not in bad else None
            if (lines is None) == (obj is None) and "object" not in bad:
                col.add(rel, line, "KB015", "lines", "give exactly one of `lines: [first, last]` or `object: dotted.path`")
            elif lines is not None and not (
                    isinstance(lines, list) and len(lines) == 2
                    and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
                    and 1 <= lines[0] <= lines[1]):
                col.add(rel, item["__lines__"].get("lines", line), "KB015", "lines",
                        f"must be [first, last] with 1 <= first <= last, got {_shown(lines)}"
                        if not isinstance(lines, list) or len(repr(lines)) > 60 else
                        f"must be [first, last] with 1 <= first <= last, got {lines!r}")
                lines = None
            elif lines is not None and src in col.line_counts and lines[1] > col.line_counts[src]:
                col.add(rel, item["__lines__"].get("lines", line), "KB015", "lines",
                        f"[{lines[0]}, {lines[1]}] goes past the end of evidence for '{src}' "
                        f"({col.line_counts[src]} lines)")  # kept: `kb verify --fix-lines` can fix it
            quotes[qid] = Quote(
                id=qid, text=None if "text" in bad else item.get("text"), source=src, lines=lines,
                object=obj, themes=[] if "themes" in bad else item.get("themes") or [],
                short=item.get("short") is True,
                author=item.get("author") if isinstance(item.get("author"), str) else None, path=rel, line=line)
    return quotes


def _parse_entries(root, quotes, col, yaml, loader) -> dict:
    entries = {}
    entries_dir = os.path.join(root, "entries")
    for path in scan_files(entries_dir, YAML_FILES, col.skipped):
        rel = col.rel(path)
        data = _read_yaml(path, col, yaml, loader)
        if data is None:
            if not any(p.path == rel for p in col.problems):
                col.add(rel, 1, "KB002", "", "the file is empty; an entry is a mapping of fields")
            continue
        if not isinstance(data, dict):
            col.add(rel, 1, "KB002", "", "an entry must be a mapping of fields")
            continue
        lines = data["__lines__"]
        bad = _check_fields(data, ENTRY_FIELDS, rel, col, "entry")
        bad |= _hidden_characters(data, rel, col, bad)
        stem = os.path.splitext(os.path.basename(path))[0]
        eid = data.get("id")
        if isinstance(eid, str):
            if eid != stem:
                col.add(rel, lines["id"], "KB006", "id", f"'{eid}' differs from the file name '{stem}'")
            if not is_kebab_id(eid):
                col.add(rel, lines["id"], "KB017", "id", f"'{eid}' is not kebab-case")
        eid = stem
        if eid == "index":
            col.add(rel, lines.get("id", 1), "KB024", "id", "'index' is the site's page listing the entries; "
                                                            "choose another id")
        if eid in entries:
            col.add(rel, 1, "KB007", "id", f"duplicate entry id '{eid}' (first in {entries[eid].path})")
            continue
        folder = os.path.relpath(os.path.dirname(path), entries_dir).split(os.sep)[0]
        area = data.get("area")
        if area in AREAS and folder != area:
            col.add(rel, lines["area"], "KB009", "area", f"area '{area}' but the file is in entries/{folder}/")
        symptoms = data.get("symptoms")
        if isinstance(symptoms, list) and len(symptoms) < 3:
            col.add(rel, lines["symptoms"], "KB013", "symptoms", f"has {len(symptoms)}, needs at least 3")
        if data.get("evidence_note") and data.get("evidence"):
            col.add(rel, lines.get("evidence_note", 1), "KB028", "evidence_note",
                    "the entry cites quotes in `evidence`, so there is nothing for a note on their absence to "
                    "explain; drop the note or the quotes")
        if data.get("snippet_kind") == "diagnostic" and not data.get("snippet_note"):
            col.add(rel, lines.get("snippet_kind", 1), "KB018", "snippet_note",
                    "a diagnostic snippet must say why the bug itself is not reproduced")
        # validated first: a field that failed its check is left out, never indexed or cached
        listed, text = _valid_readers(data, bad)
        entries[eid] = Entry(
            id=eid, title=text("title"), area=text("area"), tags=listed("tags"),
            aliases=listed("aliases"), symptoms=listed("symptoms"), cause=text("cause"),
            fix=text("fix"), check=text("check"),
            fix_pair=None if "fix_pair" in bad or "fix_pair" not in data else
            {side: data["fix_pair"][side].strip("\n") for side in FIX_PAIR_SIDES}, caveats=text("caveats"),
            correction=text("correction"), see_also=listed("see_also"),
            evidence=[] if "evidence" in bad else _citations(data, rel, col), evidence_note=text("evidence_note"),
            snippet_kind=text("snippet_kind"),
            snippet_note=text("snippet_note"), launch=text("launch") or "python",
            snippet=text("snippet") or "",
            figures={} if _figures_problem(data.get("figures")) else _figures(data.get("figures")),
            path=rel, lines={k: v for k, v in lines.items()},
            snippet_line=data["__blocks__"].get("snippet", lines.get("snippet", 1)),
        )
        entries[eid].lines["__items__"] = data["__items__"]
        pair, snippet = entries[eid].fix_pair, data.get("snippet")
        if pair and isinstance(snippet, str) and "snippet" not in bad:
            side = missing_fix_pair_side(pair, snippet)
            if side:
                col.add(rel, lines["fix_pair"], "KB004", "fix_pair",
                        f"`{side}` is not in the snippet line for line (indentation aside); "
                        f"copy the lines the snippet runs")
            helper = None if side else harness_toggle(pair, snippet)
            if helper:
                col.add(rel, lines["fix_pair"], "KB029", "fix_pair",
                        f"both sides only call the snippet's own `{helper}()`; show the "
                        f"lines a user writes (the optimizer, the loss, the loop), as the snippet runs them")
    _check_references(entries, quotes, col)
    return entries


def _valid_readers(data: dict, bad: set) -> tuple:
    """(listed, text): an entry's list and text fields as they go into the KB, a field that failed its
    check read as empty (validated first: a bad value is never indexed or cached)."""
    def listed(field: str) -> list:
        value = data.get(field)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) and field not in bad else []

    def text(field: str):
        return None if field in bad else data.get(field)
    return listed, text


def _citations(data: dict, rel: str, col: _Collector) -> list:
    """The entry's `evidence` as [{"quote", "supports"}], each bad item reported (KB023)."""
    value = data.get("evidence")
    if value is None:
        return []
    line = data["__lines__"].get("evidence", 1)
    if not isinstance(value, list):
        col.add(rel, line, "KB023", "evidence", "must be a list of `- quote: ID` / `supports: ...` items")
        return []
    good = []
    for item, at in zip(value, data["__items__"].get("evidence", [line] * len(value))):
        if isinstance(item, str):
            col.add(rel, at, "KB023", "evidence", f"'{item}' is a bare id; write it as `- quote: {item}` with "
                                                  f"`supports:` (one line: why this quote backs the entry)")
            continue
        if not isinstance(item, dict):
            col.add(rel, at, "KB023", "evidence", "each item is a mapping with `quote` and `supports`")
            continue
        for key in item:
            if isinstance(key, str) and key.startswith("__"):
                continue
            if key not in EVIDENCE_FIELDS:
                col.add(rel, item["__lines__"].get(key, at), "KB005", "evidence",
                        f"unknown citation field '{key}'{did_you_mean(str(key), EVIDENCE_FIELDS)}")
        qid, supports = item.get("quote"), item.get("supports")
        if not (isinstance(qid, str) and qid.strip()):
            col.add(rel, at, "KB023", "evidence", "an item needs `quote:` naming a quote id")
            continue
        if not (isinstance(supports, str) and supports.strip()):
            col.add(rel, item["__lines__"].get("supports", at), "KB023", "evidence",
                    f"'{qid}' needs `supports:`, one line saying why this quote backs the entry's cause or fix")
            continue
        supports = supports.strip()
        if "\n" in supports or len(supports) > SUPPORTS_MAX:
            col.add(rel, item["__lines__"].get("supports", at), "KB023", "evidence",
                    f"'{qid}': `supports` is one line of at most {SUPPORTS_MAX} characters "
                    f"(this one has {len(supports)})")
            continue
        good.append({"quote": qid, "supports": supports, "line": at})
    return good


_URL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def url_safe(name: str) -> bool:
    """Whether `name` can be a page of the site as it is: letters, digits, '.', '_' and '-'."""
    return bool(name) and set(name) <= _URL_CHARS and name not in (".", "..")


def _check_references(entries: dict, quotes: dict, col: _Collector) -> None:
    """see_also, evidence and aliases can only be checked once every file is read."""
    owner = {}
    known = set(entries) | {a for e in entries.values() for a in e.aliases}
    for e in entries.values():
        items = e.lines["__items__"]
        for ref, line in zip(e.see_also, items.get("see_also", [])):
            if ref not in entries:
                col.add(e.path, line, "KB010", "see_also", f"unknown entry '{ref}'{did_you_mean(ref, entries)}")
            elif ref == e.id:
                col.add(e.path, line, "KB010", "see_also", f"'{ref}' is this entry itself")
        for cite in e.evidence:
            ref = cite["quote"]
            if ref not in quotes:
                col.add(e.path, cite["line"], "KB011", "evidence", f"unknown quote '{ref}'{did_you_mean(ref, quotes)}")
        _check_mentions(e, known, col)
        own = set()
        for alias, line in zip(e.aliases, items.get("aliases", [])):
            key = alias.lower()
            if not url_safe(alias):
                col.add(e.path, line, "KB024", "aliases", f"alias '{alias}' cannot be a page name (the site serves "
                                                          f"/ALIAS/): use letters, digits, '.', '_' and '-' only")
            elif key in SITE_PAGES:
                col.add(e.path, line, "KB024", "aliases", f"alias '{alias}' is the name of the site's own /{key}/ page")
            if key == e.id:
                col.add(e.path, line, "KB012", "aliases", f"alias '{alias}' is this entry's own id")
            elif key in own:
                col.add(e.path, line, "KB012", "aliases", f"alias '{alias}' is listed twice (case is ignored)")
            elif key in entries:
                col.add(e.path, line, "KB012", "aliases", f"alias '{alias}' is the id of another entry")
            elif key in owner and owner[key] != e.id:
                col.add(e.path, line, "KB012", "aliases", f"alias '{alias}' is also used by '{owner[key]}'")
            own.add(key)
            owner.setdefault(key, e.id)


def _check_mentions(e, known: set, col: _Collector) -> None:
    """KB025: prose that names an entry by a form the site would link, but no entry has that name."""
    for field in PROSE_FIELDS:
        text = getattr(e, field)
        if not isinstance(text, str):
            continue
        for word in dead_mentions(text, known):
            col.add(e.path, e.lines.get(field, 1), "KB025", field,
                    f"names '{word}', which is no entry's id or alias{did_you_mean(word, known)}")
