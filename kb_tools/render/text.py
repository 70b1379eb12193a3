"""An entry for a terminal (`kb show`): the sections of render/sections.py as plain text, headings
styled when the output is a terminal; the snippet is named by the commands that run it (`kb
snippet` prints the code itself)."""
from __future__ import annotations

from kb_tools.render.sections import entry_sections


def _plain(style):
    return style or (lambda text, _code: text)


def run_hint(entry) -> str:
    """How to run an entry's snippet, in one line."""
    if entry.launch == "torchrun":
        from kb_tools.snippets.runner import launch_line
        return (f"run it: kb run {entry.id}   (two processes under torchrun, as `kb snippet {entry.id} > s.py && "
                f"{launch_line(entry, 's.py')}`)")
    return f"run it: kb run {entry.id}   (or: kb snippet {entry.id} | python)"


def part_text(entry, part, value) -> str:
    kind = part.kind
    if kind == "list":
        return "\n".join(f"- {' '.join(str(v).split())}" for v in value)
    if kind == "prose":
        return value.strip()
    if kind == "warning":
        return f"{part.label}: {value.strip()}"
    if kind == "code_pair":
        return "\n".join(f"{side}:\n" + "\n".join(f"    {line}" for line in value[side].splitlines())
                         for side in ("before", "after"))
    if kind == "rules":
        return "\n".join(f"{r['code']} {r['name']} (kb lint finds it in a script)" for r in value)
    if kind == "figures":
        return f"{part.label}: " + ", ".join(f"{name} {claim}" for name, claim in value.items())
    if kind == "snippet":
        return run_hint(entry)
    if kind == "evidence":
        return "\n".join(f"- {c['quote']}: {c['supports']}" for c in value)
    if kind == "entries":
        return ", ".join(value)
    raise ValueError(f"no text form for the part kind {kind!r}")


def entry_text(entry, style=None) -> str:
    """`kb show ID`: the header, then each section under its heading."""
    style = _plain(style)
    lines = [style(f"{entry.id}: {entry.title}", "1"),
             f"area: {entry.area}   tags: {', '.join(entry.tags)}"
             + (f"   aliases: {', '.join(entry.aliases)}" if entry.aliases else ""),
             f"file: {entry.path}"]
    for section in entry_sections(entry):
        body = "\n\n".join(part_text(entry, part, value) for part, value in section.parts) or section.empty
        lines.append(f"\n{style(section.heading, '1;4')}\n{body}")
    return "\n".join(lines) + "\n"
