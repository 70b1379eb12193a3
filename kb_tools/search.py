"""Rank entries for a symptom query, from two words to a pasted paragraph.

This module is on the hot path of `kb search`: it imports nothing heavy at
module level (no torch, jinja2, mkdocs, yaml), and rapidfuzz only when called.
"""
from __future__ import annotations

MAX_QUERY_CHARS = 10_000

# How much a match in each field counts: symptoms are what users type.
FIELD_WEIGHTS = {
    "symptoms": 1.0, "title": 0.9, "aliases": 0.9, "tags": 0.7, "cause": 0.6, "fix": 0.5,
}


class QueryError(ValueError):
    """The query itself is unusable (empty, or too long to be a query)."""


class Hit:
    """One ranked entry: its score (0-100) and the text that matched best."""

    __slots__ = ("entry", "score", "field", "matched", "low_confidence")

    def __init__(self, entry, score, field, matched, low_confidence=False):
        self.entry, self.score, self.field, self.matched = entry, score, field, matched
        self.low_confidence = low_confidence

    def to_json(self) -> dict:
        e = self.entry
        return {"id": e.id, "title": e.title, "area": e.area, "score": round(self.score, 1),
                "matched": self.matched, "field": self.field,
                "low_confidence": self.low_confidence}


def validate_query(query: str) -> str:
    query = " ".join(query.split())
    if not query:
        raise QueryError("empty query: describe what you see, e.g. kb search \"loss flat\"")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query


def filter_entries(entries, area: str | None = None, tag: str | None = None) -> list:
    return [e for e in entries if (area is None or e.area == area)
            and (tag is None or tag.lower() in (t.lower() for t in e.tags))]


def _field_texts(entry) -> list:
    """(field, text) pairs the fuzzy ranking compares the query with."""
    pairs = [("symptoms", s) for s in entry.symptoms]
    pairs.append(("title", entry.title or ""))
    pairs += [("aliases", a) for a in entry.aliases]
    if entry.tags:
        pairs.append(("tags", " ".join(entry.tags)))
    pairs += [("cause", entry.cause or ""), ("fix", entry.fix or "")]
    return pairs


def rank_fuzzy(entries, query: str, limit: int = 10) -> list:
    """The first ranking: best weighted rapidfuzz WRatio over each entry's fields."""
    from rapidfuzz import fuzz, process, utils

    query = validate_query(query)
    texts, owners = [], []
    for i, entry in enumerate(entries):
        for field, text in _field_texts(entry):
            texts.append(text)
            owners.append((i, field))
    if not texts:
        return []
    scores = process.cdist([query], texts, scorer=fuzz.WRatio, processor=utils.default_process)[0]
    best = {}
    for (i, field), text, raw in zip(owners, texts, scores):
        score = float(raw) * FIELD_WEIGHTS[field]
        if i not in best or score > best[i][0]:
            best[i] = (score, field, text)
    ranked = sorted(best.items(), key=lambda kv: -kv[1][0])
    hits = []
    for i, (score, field, text) in ranked[:limit]:
        entry = entries[i]
        if field != "symptoms":  # show the closest symptom line all the same
            text = max(entry.symptoms, key=lambda s: fuzz.WRatio(query, s, processor=utils.default_process),
                       default=text)
        hits.append(Hit(entry, score, field, text))
    return [h for h in hits if h.score > 0]


def search(kb, query: str, limit: int = 10, area: str | None = None, tag: str | None = None) -> list:
    """The ranked hits for `query` among the KB's entries, best first."""
    query = validate_query(query)
    return rank_fuzzy(filter_entries(kb.entries.values(), area, tag), query, limit)
