"""An entry's sections, described once and read by every renderer: `kb show` (render/text.py),
`kb show --json` and the MCP `show` tool (entry_json below), the Markdown copies agents read
(render/markdown.py) and the site's entry page (site_templates/entry.md.j2).

A section has a heading and parts; a part reads one value of the entry and has a kind that
tells a renderer how to show it (a list of lines, prose, a before/after pair of code, ...).
A part whose value is empty is left out, and a section with no part left is too.

Adding something a reader should see is one `Part` here: every renderer shows it, under its
section, by its kind (tests/test_render.py adds one and finds it in all four).
"""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("list", "prose", "warning", "code_pair", "rules", "figures", "snippet", "evidence", "entries")


@dataclass(frozen=True)
class Part:
    key: str            # the JSON key; the entry attribute read unless `read` says otherwise
    kind: str           # one of KINDS
    label: str = ""     # a caption some kinds show (the warning's title)
    read: object = None  # callable(entry) -> value, for a value that is not an entry attribute

    def value(self, entry):
        return self.read(entry) if self.read is not None else getattr(entry, self.key, None)


@dataclass(frozen=True)
class Section:
    key: str
    heading: str
    parts: tuple
    empty: str | None = None  # shown when no part has a value; None leaves the section out


def _lint_rules(entry) -> list:
    from kb_tools.lint.engine import rules_for
    return [{"code": code, "name": name} for code, name in rules_for(entry.id)]


def _evidence(entry) -> list:
    return [{"quote": c["quote"], "supports": c["supports"]} for c in entry.evidence or ()]


SECTIONS = (
    Section("symptoms", "Symptoms", (Part("symptoms", "list"),)),
    Section("cause", "Why it happens", (Part("cause", "prose"),)),
    Section("fix", "Fix", (Part("fix_pair", "code_pair"), Part("fix", "prose"),
                           Part("correction", "warning", label="Correction to common advice"))),
    Section("check", "How to check", (Part("check", "prose"), Part("lint_rules", "rules", read=_lint_rules))),
    Section("snippet", "Snippet", (Part("snippet_note", "prose"), Part("snippet", "snippet"),
                                   Part("figures", "figures", label="Figures the snippet measures"))),
    Section("evidence", "Evidence", (Part("evidence", "evidence", read=_evidence),
                                     Part("evidence_note", "warning", label="No primary source found")),
            empty="No quotes back this entry yet."),
    Section("caveats", "Caveats", (Part("caveats", "prose"),)),
    Section("see_also", "See also", (Part("see_also", "entries"),), empty="Nothing listed."),
)


# The site's entry page, in the order a person mid-debug reads: its top (site_templates/entry.md.j2)
# shows the title, the first sentence of the fix, the verified badge and the fix pair; then these.
PAGE_ORDER = ("symptoms", "cause", "fix", "check", "caveats", "see_also", "evidence", "snippet")
PAGE_TOP_PARTS = ("fix_pair",)  # drawn at the top of the page, so not again under their section


def page_sections(entry) -> list:
    """The entry's sections in PAGE_ORDER, without the parts the page's top already shows."""
    by_key = {s.key: s for s in SECTIONS}
    ordered = [by_key[k] for k in PAGE_ORDER] + [s for s in SECTIONS if s.key not in PAGE_ORDER]
    trimmed = [Section(s.key, s.heading, tuple(p for p in s.parts if p.key not in PAGE_TOP_PARTS), s.empty)
               for s in ordered]
    return entry_sections(entry, trimmed)


@dataclass(frozen=True)
class Shown:
    """A section as one entry fills it: its parts that have a value, as (part, value); `empty`
    is the text to show instead when it has none."""
    key: str
    heading: str
    parts: tuple
    empty: str | None = None


def _empty(value) -> bool:
    return value is None or value == "" or value == [] or value == {}


def entry_sections(entry, sections=None) -> list:
    """The entry's sections in reading order, each with its non-empty parts."""
    out = []
    for section in SECTIONS if sections is None else sections:
        filled = tuple((part, part.value(entry)) for part in section.parts)
        filled = tuple((p, v) for p, v in filled if not _empty(v))
        if filled or section.empty:
            out.append(Shown(section.key, section.heading, filled, None if filled else section.empty))
    return out


HEADER_FIELDS = ("id", "title", "area", "tags", "aliases")
INTERNAL_FIELDS = ("lines", "snippet_line")  # bookkeeping for messages, not content


def entry_json(entry) -> dict:
    """An entry as `kb show --json` prints it and the MCP `show` tool returns it: every field of the
    entry, then every part of every section by its key (an empty one as its empty value)."""
    shown = {k: v for k, v in entry.to_dict().items() if k not in INTERNAL_FIELDS}
    for section in SECTIONS:
        for part in section.parts:
            shown[part.key] = part.value(entry)
    return shown
