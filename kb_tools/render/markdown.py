"""An entry as plain Markdown, for agents and the site's Markdown copies: the sections of
render/sections.py in their order, compact (no HTML, no navigation), the snippet in full."""
from __future__ import annotations

from kb_tools.render.sections import entry_sections


def _line(text: str) -> str:
    return " ".join(str(text).split())


def _evidence_markdown(kb, cite: dict) -> str:
    """A cited quote in full, with its author, source and lines, and why it is cited."""
    q = kb.quotes.get(cite["quote"])
    if q is None:
        return f"- `{cite['quote']}`: {_line(cite['supports'])}"
    src = kb.sources.get(q.source)
    where = f"lines {q.lines[0]}-{q.lines[1]}" if q.lines else f"`{q.object}` docstring" if q.object else ""
    title = f", *{_line(src.title)}*" if src is not None and src.title else ""
    text = "\n".join(f"> {line}" if line.strip() else ">" for line in str(q.text).strip().splitlines())
    return (f"{text}\n\n— {_line(q.author or (src.author if src else ''))}{title} (source `{q.source}`"
            f"{', ' + where if where else ''}; quote `{q.id}`). Why it is cited: {_line(cite['supports'])}")


def part_markdown(entry, part, value, snippet: bool = True, kb=None) -> str | None:
    kind = part.kind
    if kind == "list":
        return "\n".join(f"- {_line(v)}" for v in value)
    if kind == "prose":
        return _line(value)
    if kind == "warning":
        return f"**{part.label}:** {_line(value)}"
    if kind == "code_pair":
        return "\n\n".join(f"{side.capitalize()}:\n```python\n{value[side]}\n```" for side in ("before", "after"))
    if kind == "rules":
        return "`kb lint` finds this mistake in a script: " + ", ".join(f"`{r['code']}` ({r['name']})" for r in value)
    if kind == "figures":
        return f"{part.label}: " + ", ".join(f"{name} {claim}" for name, claim in value.items())
    if kind == "snippet":
        if not snippet:
            return None
        return (f"Reproduces the bug, applies the fix, asserts both (`kb run {entry.id}`):\n"
                f"```python\n{value.rstrip()}\n```")
    if kind == "evidence":
        if kb is not None:
            return "\n\n".join(_evidence_markdown(kb, c) for c in value)
        return "\n".join(f"- `{c['quote']}`: {_line(c['supports'])}" for c in value)
    if kind == "entries":
        return ", ".join(value)
    raise ValueError(f"no Markdown form for the part kind {kind!r}")


def entry_markdown(entry, symptoms=None, snippet: bool = True, status: str | None = None, kb=None) -> str:
    """One entry as plain Markdown: what an agent needs to act, in that order. `symptoms` replaces
    the entry's own list (e.g. only those that matched); `status` is one line on where the
    snippet last passed, placed under the snippet; with `kb`, the evidence is each quote in full
    with its source and lines (the site's Markdown copies), else its id and why it is cited."""
    parts = [f"## {entry.id}: {entry.title}", f"area: {entry.area}"
             + (f"; aliases: {', '.join(entry.aliases)}" if entry.aliases else "")]
    for section in entry_sections(entry):
        bodies = []
        for part, value in section.parts:
            if part.key == "symptoms" and symptoms is not None:
                value = symptoms
                if not value:
                    continue
            body = part_markdown(entry, part, value, snippet, kb)
            if body:
                bodies.append(body)
        if section.key == "snippet" and status and snippet:
            bodies.append(status)
        if bodies or section.empty:
            parts.append(f"### {section.heading}\n\n" + ("\n\n".join(bodies) or section.empty))
    return "\n\n".join(parts) + "\n"


def compact_markdown(entry, matched, matched_label: str = "Matched symptom") -> str:
    """An entry for a context window: title, the symptom that matched (or what a watched run
    measured), cause, fix, check."""
    parts = [f"## {entry.id}: {entry.title}"]
    if matched:
        parts.append(f"{matched_label}: " + _line(matched))
    for heading, text in (("Cause", entry.cause), ("Fix", entry.fix), ("Check", entry.check)):
        parts.append(f"{heading}: {_line(text or '')}")
    parts.append(f"More: `kb show {entry.id}`; runnable proof of bug and fix: `kb snippet {entry.id} | python`")
    return "\n\n".join(parts) + "\n"
