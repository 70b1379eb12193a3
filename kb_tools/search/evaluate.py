"""How well the ranking answers labelled queries (hit@1, hit@3, MRR, each miss), and the first
ranking (rapidfuzz over the fields), kept as the baseline the benchmarks compare with."""
from __future__ import annotations

import hashlib

from kb_tools.search.rank import Hit, QueryError, rank, validate_query


# ---------------------------------------------------------------- the first ranking, kept as a baseline

def _field_texts(entry) -> list:
    """(field, text) pairs the fuzzy ranking compares the query with."""
    pairs = [("symptoms", s) for s in entry.symptoms]
    pairs.append(("title", entry.title or ""))
    pairs += [("aliases", a) for a in entry.aliases]
    if entry.tags:
        pairs.append(("tags", " ".join(entry.tags)))
    pairs += [("cause", entry.cause or ""), ("fix", entry.fix or "")]
    return pairs


FUZZY_WEIGHTS = {"symptoms": 1.0, "title": 0.9, "aliases": 0.9, "tags": 0.7, "cause": 0.6, "fix": 0.5}


def rank_fuzzy(entries, query: str, limit: int = 10) -> list:
    """The first ranking: best weighted rapidfuzz WRatio over each entry's fields."""
    from rapidfuzz import fuzz, process, utils

    query = validate_query(query)
    entries = list(entries)
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
        score = float(raw) * FUZZY_WEIGHTS[field]
        if i not in best or score > best[i][0]:
            best[i] = (score, field, text)
    ranked = sorted(best.items(), key=lambda kv: -kv[1][0])
    return [Hit(entries[i].id, entries[i].title, entries[i].area, score, text)
            for i, (score, field, text) in ranked[:limit] if score > 0]


# ---------------------------------------------------------------- evaluation

# The real-report splits: a report's side is decided by the sha256 of its thread's normalised URL
# (no fragment, query or trailing slash), so two reports of one thread never straddle the split and
# the assignment depends neither on order nor on the ranking (scripts/split_reports.py writes them).
TEST_SHARE = 0.5


def thread_key(url: str) -> str:
    """A report's thread: its URL without fragment, query or trailing slash, lower-cased."""
    return url.split("#")[0].split("?")[0].rstrip("/").lower()


def side(url: str) -> str:
    """"dev" or "test": the split a report of this thread belongs to."""
    digest = hashlib.sha256(thread_key(url).encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2 ** 64 < TEST_SHARE else "dev"


def load_queries(path: str) -> list:
    """Labelled queries: a list of {query, expect: [ids, best first], kind}."""
    import yaml
    from kb_tools.core.util import KBError
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise KBError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise KBError(f"{path}: cannot read: not UTF-8 text ({exc.reason})") from None
    except yaml.YAMLError as exc:
        raise KBError(f"{path}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    queries = data.get("queries") if isinstance(data, dict) else None
    if not isinstance(queries, list):
        raise KBError(f"{path}: expected `queries:` with a list of {{query, expect}} items")
    for n, q in enumerate(queries, 1):
        if not (isinstance(q, dict) and isinstance(q.get("query"), str) and isinstance(q.get("expect"), list)
                and q["expect"] and all(isinstance(i, str) for i in q["expect"])):
            raise KBError(f"{path}: query #{n}: needs `query` (text) and `expect` (a list of entry ids)")
        if not isinstance(q.get("kind", ""), str):
            raise KBError(f"{path}: query #{n}: `kind` must be text (quote a date or a number)")
        try:
            validate_query(q["query"])
        except QueryError as exc:
            raise KBError(f"{path}: query #{n}: {exc}") from None
    return queries


def evaluate(index, queries: list, ranker=None, depth: int = 10) -> dict:
    """hit@1, hit@3 and MRR of `ranker(query, limit) -> ids` (default: `rank`), with every miss.

    A query is answered at the first rank that holds any of its acceptable ids.
    """
    ranker = ranker or (lambda query, limit: [h.id for h in rank(index, query, limit)])
    known = set(index.header["ids"])
    unknown = sorted({i for q in queries for i in q["expect"] if i not in known})
    rows, misses = [], []
    for q in queries:
        ranked = ranker(q["query"], depth)
        found = next((n for n, eid in enumerate(ranked, 1) if eid in q["expect"]), None)
        rows.append(found)
        if found != 1:
            misses.append({"query": q["query"], "kind": q.get("kind", ""), "expect": q["expect"],
                           "rank": found, "above": ranked[: (found or depth + 1) - 1][:5]})
    total = len(rows) or 1
    return {
        "queries": len(rows),
        "hit@1": sum(1 for r in rows if r == 1) / total,
        "hit@3": sum(1 for r in rows if r and r <= 3) / total,
        "mrr": sum(1 / r for r in rows if r) / total,
        "misses": misses,
        "unknown_ids": unknown,
    }
