"""What coding agents read: the JSON shapes the CLI and the MCP server share, an entry as
plain Markdown, `kb context` (the best entries for a query, trimmed to a token budget),
llms.txt and a SKILL.md generated from the KB so it cannot drift.

An agent pastes these into a model's context window, so every rendering is compact:
no HTML, no navigation, the fields in the order a debugger needs them.
"""
from __future__ import annotations

from kb_tools.core.model import AREAS, TRIAGE_PATH
from kb_tools.core.util import KBError, UsageError
from kb_tools.render.markdown import compact_markdown

CHARS_PER_TOKEN = 4  # a budget is kept by this estimate: English prose and code run 3.5-4.5 characters a token
# A text to check against a source: the KB's longest quote has 511 characters and 3 parts; these bounds
# keep a check under a second (the search for a changed word is quadratic in a part's length).
MAX_QUOTE_CHARS, MAX_QUOTE_PARTS = 4_000, 20


def estimate_tokens(text: str) -> int:
    """A conservative token count for a budget (no tokenizer ships with the package)."""
    return -(-len(text) // CHARS_PER_TOKEN)


# ---------------------------------------------------------------- the shared JSON shapes

def snippet_json(entry) -> dict:
    """The runnable code of an entry and how to start it."""
    from kb_tools.snippets.runner import launch_line
    how = launch_line(entry)
    return {"id": entry.id, "launch": entry.launch, "run": how, "snippet": entry.snippet}


def verify_text(kb, text: str, source: str, lines=None, object_path: str | None = None) -> dict:
    """Whether `text` is verbatim in cached source `source` (at `lines` when given, or in the
    docstring of `object_path` for a package source): what `kb verify` says of such a quote."""
    from kb_tools.core.model import Quote
    from kb_tools.verify.quotes import Context, check_quote, split_quote
    if not isinstance(text, str) or not text.strip():
        raise KBError("verify_quote: `text` must be the words to check")
    if len(text) > MAX_QUOTE_CHARS:
        raise KBError(f"verify_quote: `text` is {len(text)} characters; the limit is {MAX_QUOTE_CHARS}")
    if len(split_quote(text)[0]) > MAX_QUOTE_PARTS:
        raise KBError(f"verify_quote: `text` has more than {MAX_QUOTE_PARTS} parts between [...] elisions "
                      f"and [bracketed] insertions; check a quote at a time")
    documenting = sorted(s.id for s in kb.sources.values() if s.package == source)
    if source not in kb.sources and documenting:
        raise KBError(f"verify_quote: '{source}' is a package, not a source id: pass a source that documents "
                      f"it (e.g. {', '.join(documenting[:3])}) and the dotted path of the object as `object`")
    if lines is not None and not (isinstance(lines, (list, tuple)) and len(lines) == 2
                                  and all(isinstance(n, int) for n in lines)):
        raise KBError("verify_quote: `lines` must be [first, last]")
    quote = Quote(id="checked-text", text=text, source=source, lines=list(lines) if lines else None,
                  object=object_path, themes=[], short=True, author=None, path="(given text)", line=0)
    defect = check_quote(quote, Context(kb))
    if defect is not None and defect.kind == "wrong-lines" and lines is None and not object_path:
        defect = None  # no lines were claimed: found anywhere in the source is verbatim
    return {"ok": defect is None, "source": source,
            "defect": None if defect is None else {k: defect.to_dict()[k] for k in
                                                   ("code", "kind", "message", "where", "diff", "lines")}}


def context(kb_root, query: str, budget: int = 1500, limit: int = 5, area: str | None = None,
            *, index=None, kb=None) -> dict:
    """The best entries for `query` as compact Markdown within `budget` tokens, most relevant first.

    Entries come in `kb search`'s order; one that does not fit whole is left out, never cut
    mid-sentence, except the first, which is shortened so that an answer always comes back.
    A long-running caller (the MCP server) passes the `index` and `kb` it loaded once.
    """
    from kb_tools.core.load import load_kb
    from kb_tools.search.answer import answer
    from kb_tools.search.index import load_index
    if budget < 100:
        raise UsageError("--budget must be at least 100 tokens")
    from kb_tools.lint import lint_text
    result = answer(index if index is not None else load_index(kb_root), query, limit=limit, area=area,
                    lint_source=lint_text)
    hits = result.hits
    if hits and kb is None:
        kb = load_kb(kb_root)
    header = f"# kb context for: {' '.join(query.split())[:200]}\n"
    if result.scope:
        header += f"\nOut of scope: {result.scope}. The entries below are guesses.\n"
    elif result.tell_apart:
        close = f"\nThe first {len(result.tell_apart)} entries are too close to call from the words; one check tells them apart"
        lines = ":\n" + "".join(f"- {e}: {line}\n" for e, line in result.tell_apart.items())
        # the checks themselves when they leave room for the entries; else the entries' own checks below
        header += close + (lines if estimate_tokens(header + close + lines) <= budget // 2 else " (How to check, below).\n")
    text, included = _within_budget(header, budget, [
        (compact_markdown(kb.entries[hit.id],  # what a pasted report showed, beside the symptom that matched
                          "; ".join([hit.matched] + [line for _, line in result.evidence.get(hit.id, ())])),
         {"id": hit.id, "title": hit.title, "score": round(hit.score, 1), "low_confidence": hit.low_confidence,
          **result.said(hit.id)})
        for hit in hits])
    return {"query": query, "budget": budget, "tokens": estimate_tokens(text), "entries": included,
            "markdown": text}


def context_from_watch(kb, report: dict, budget: int = 1500, limit: int = 5, area: str | None = None) -> dict:
    """The entries behind a `kb watch` report's findings as compact Markdown within `budget` tokens,
    most confident finding first, each with what this run measured as its matched symptom: what
    an agent needs to fix the run it watched (the same trimming as `context`)."""
    from kb_tools.watch.report import finding_line  # plain data: no torch
    if budget < 100:
        raise UsageError("--budget must be at least 100 tokens")
    measured = {}
    for finding in report["findings"]:
        entry = kb.entries.get(finding["entry"])
        if entry is not None and (area is None or entry.area == area):
            measured.setdefault(entry.id, []).append(finding_line(finding))
    command = " ".join(map(str, report.get("run", {}).get("command") or [])) or "a watched run"
    header = f"# kb context for what kb watch found in: {command[:200]}\n"
    if not measured:
        header += "\nkb watch found none of the KB's mistakes in this run.\n"
    text, included = _within_budget(header, budget, [
        (compact_markdown(kb.entries[entry_id], " / ".join(lines[:3]), matched_label="Measured in this run"),
         {"id": entry_id, "title": kb.entries[entry_id].title, "findings": len(lines)})
        for entry_id, lines in list(measured.items())[:limit]])
    return {"query": None, "from_watch": command, "budget": budget, "tokens": estimate_tokens(text),
            "entries": included, "markdown": text}


def _within_budget(header: str, budget: int, parts: list) -> tuple:
    """The header and as many (text, summary) parts as fit `budget` tokens, in order: one that does
    not fit whole is left out, except the first, which is shortened so that an answer always comes
    back. Returns the joined text and the summaries of the parts it holds."""
    out, used, included = [header], estimate_tokens(header), []
    for n, (text, summary) in enumerate(parts):
        if used + estimate_tokens(text) + 1 > budget:
            if n:
                continue
            text = _shortened(text, budget - used - 1)
        out.append(text)
        used += estimate_tokens(text) + 1
        included.append(summary)
    return "\n".join(out), included


def _shortened(text: str, room: int) -> str:
    """`text` cut at a word boundary to fit `room` tokens, marked as cut."""
    cut = text[:max(room - 2, 0) * CHARS_PER_TOKEN]
    return cut[:cut.rfind(" ")] + " [...]\n" if " " in cut else cut


def llms_txt(kb, base_url: str = "") -> str:
    """The site's llms.txt: what the KB is, then every entry with a one-line symptom and a
    link to its plain-Markdown copy (`md/<id>.md`), by area."""
    base = base_url.rstrip("/")
    lines = ["# kb: debugging PyTorch training that runs but does not learn", "",
             "> Entries of symptom, cause, fix and the cheapest check that tells a cause from its "
             "look-alikes; each entry's snippet reproduces the bug, applies the fix and asserts both "
             "on real torch. Plain-Markdown copies are linked below.", ""]
    for area in AREAS:
        entries = sorted((e for e in kb.entries.values() if e.area == area), key=lambda e: e.id)
        if not entries:
            continue
        lines += [f"## {area}", ""]
        for e in entries:
            symptom = " ".join(e.symptoms[0].split()) if e.symptoms else e.title
            if len(symptom) > 140:
                symptom = symptom[:137].rsplit(" ", 1)[0] + "..."
            link = f"{base}/md/{e.id}.md" if base else f"md/{e.id}.md"
            lines.append(f"- [{e.id}]({link}): {e.title}. Seen as: {symptom}")
        lines.append("")
    return "\n".join(lines)


def skill_markdown(kb) -> str:
    """A self-contained SKILL.md for agent hosts that load skills, generated from the KB."""
    triage = [kb.entries[i] for i in TRIAGE_PATH if i in kb.entries]
    areas = {a: sum(1 for e in kb.entries.values() if e.area == a) for a in AREAS}
    lines = [
        "---",
        "name: pytorch-training-debugging",
        "description: Diagnose a PyTorch training run that runs but does not learn (loss flat, NaN, "
        "accuracy at chance, val worse than train, a torch error) with a source-checked knowledge base "
        f"of {len(kb.entries)} known causes, each proven by a runnable snippet. Use it before guessing "
        "at hyperparameters.",
        "---",
        "",
        "# Debugging a PyTorch run that trains but does not learn",
        "",
        "The `kb` command answers from a curated knowledge base: each entry is a known cause with its "
        "symptoms, the fix, the cheapest check that tells it from look-alikes, and a snippet that "
        "reproduces the bug and the fix on real torch.",
        "",
        "## How to use it",
        "",
        "1. Describe what the run shows, in the user's words or the pasted error: "
        "`kb search \"loss flat after warmup\" --json` (add `--area AREA` to narrow it). "
        "Results are best first; `low_confidence: true` means no entry explains the query well.",
        "2. For the best few hits: `kb context \"<same query>\" --budget 1500` gives cause, fix and check "
        "as compact Markdown; `kb show ID --json` gives one entry whole.",
        "3. Run the entry's check on the user's code before changing anything; `kb snippet ID` prints a "
        "self-contained program (pipe it to python) that shows the bug and the fix.",
        "4. Apply the fix, then confirm with the symptom that brought you here (the loss curve, the metric).",
        "",
        "## First hour with a run that misbehaves",
        "",
        "When the symptom is vague, go through these in order; each is an entry (`kb show ID`):",
        "",
    ]
    lines += [f"{n}. `{e.id}`: {e.title}" for n, e in enumerate(triage, 1)]
    lines += ["", "## Areas", ""]
    lines += [f"- `{a}`: {count} entries" for a, count in areas.items() if count]
    lines += ["", "## Entries", ""]
    for e in sorted(kb.entries.values(), key=lambda e: (AREAS.index(e.area), e.id)):
        lines.append(f"- `{e.id}` ({e.area}): {e.title}")
    return "\n".join(lines) + "\n"


def export_skill(kb, directory: str) -> str:
    """Write DIR/SKILL.md (atomically); returns its path."""
    import os

    from kb_tools.core.util import write_atomic
    try:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "SKILL.md")
        write_atomic(path, skill_markdown(kb))
    except OSError as exc:
        raise KBError(f"{exc.filename or directory}: cannot write there: {exc.strerror or exc}") from None
    return path
