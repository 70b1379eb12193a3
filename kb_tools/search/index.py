"""The search index: every entry's terms and their weights (BM25's postings), its symptom lines,
and the entry vectors of the dense side, built once from a loaded KB and cached (core/cache.py)
until a KB file changes.

The cache key holds `index_version()`: INDEX_VERSION and a stamp of the modules that shape the
index (this one and tokenize.py), so an edit to either rebuilds the cached index by itself.
"""
from __future__ import annotations

import math
import sys

from kb_tools.search import embedders
from kb_tools.search.tokenize import build_phrase_table, terms

INDEX_VERSION = 15  # bump only for what the stamped modules do not show
INDEX_MODULES = ("search/index.py", "search/tokenize.py")


def index_version() -> tuple:
    from kb_tools.core.locate import code_stamp
    return (INDEX_VERSION, code_stamp(*INDEX_MODULES))


# How much a term in each field counts: symptoms are what users type. BM25's k1 and the check's weight
# were set on 800 of the self-written reports (scripts/data/synthetic_reports.yaml; lexical MRR 0.725 ->
# 0.739), then confirmed on the real-report dev split (lexical 0.752 -> 0.773, fused 0.826 -> 0.830).
FIELD_WEIGHTS = {
    "symptoms": 3.0, "title": 2.5, "aliases": 3.0, "tags": 1.5,
    "cause": 1.0, "fix": 0.7, "check": 0.2, "correction": 0.4,
}


def index_parts(kb, embedder=None, dense: bool = True) -> tuple:
    """The index as (header, records): plain, marshal-able data.

    The header holds what every query needs (ids, phrase table, lengths, areas
    and tags for filters); records hold what a query reads selectively:
    ("p", term) -> (IDF, postings [(entry, weighted tf)]), ("e", entry) -> (title,
    symptoms, each symptom's terms, each symptom's IDF mass, the check's opening (check_line): the
    "tell apart" line of a differential). A term is known when
    it has a "p" record; its IDF is read with its postings, so opening the index
    never decodes the whole vocabulary.
    """
    phrases = build_phrase_table(kb.synonyms)
    longest = max((len(k) for k in phrases), default=1)
    ids, areas, tags, lengths, postings = [], [], [], [], {}
    records: dict = {}
    for idx, e in enumerate(kb.entries.values()):
        ids.append(e.id)
        areas.append(e.area)
        tags.append([t.lower() for t in e.tags])
        bag = {}
        fields = {"symptoms": e.symptoms, "title": [e.title], "aliases": e.aliases,
                  "tags": [" ".join(e.tags)], "cause": [e.cause], "fix": [e.fix],
                  "check": [e.check], "correction": [e.correction or ""]}
        for field, texts in fields.items():
            weight = FIELD_WEIGHTS[field]
            for text in texts:
                for term in terms(text or "", phrases, longest):
                    bag[term] = bag.get(term, 0.0) + weight
        for alias in e.aliases:  # an alias typed alone ("O12") is an exact name
            bag["=" + alias.lower()] = FIELD_WEIGHTS["aliases"]
        lengths.append(sum(bag.values()))
        records[("e", idx)] = (e.title, e.symptoms,
                               [sorted(set(terms(s, phrases, longest))) for s in e.symptoms])
        for term, tf in bag.items():
            postings.setdefault(term, []).append((idx, tf))
    n = max(len(ids), 1)
    idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in postings.items()}
    from kb_tools.core.util import check_line
    for idx, e in enumerate(kb.entries.values()):  # each symptom line's IDF mass, summed once here, not per query
        title, symptoms, line_terms = records[("e", idx)]
        records[("e", idx)] = (title, symptoms, line_terms, [sum(idf[t] for t in line) for line in line_terms],
                               check_line(e.check))
    records.update((("p", term), (idf[term], p)) for term, p in postings.items())
    header = {"ids": ids, "areas": areas, "tags": tags, "lengths": lengths,
              "phrases": phrases, "longest": longest, "problems": [str(p) for p in kb.problems],
              "avg_length": (sum(lengths) / len(lengths)) if lengths else 1.0, "dense": None}
    if embedder is not None:  # queries against this index are embedded by this very object
        _remember(embedder)
    if dense and not kb.problems:  # validate first, index second: vectors only for a KB whose fields are sound
        header["dense"] = _dense_parts(kb, records, embedder or embedders.load())
    return header, records


def dense_texts(entry) -> list:
    """The texts of an entry the dense side compares a query with; the entry scores its best one."""
    return [entry.title, *entry.symptoms]


def _dense_parts(kb, records: dict, embedder):
    """Embed every entry's dense texts into records[("v", 0)]; the header part says how to read them
    and which embedder made them (a query must be embedded by the same one).

    None when numpy or the embedder is unavailable: the index is then lexical
    only, and a later search rebuilds it once they are there (see `load_index`).
    """
    try:
        import numpy as np
    except ImportError:
        return None
    if embedder is None:
        return None
    owners, texts = [], []
    for idx, e in enumerate(kb.entries.values()):
        for text in dense_texts(e):
            owners.append(idx)
            texts.append(text)
    matrix = _embed_reusing(embedder, texts)
    scales = np.abs(matrix).max(axis=1) / 127.0  # int8 rows, as the token table: a quarter of float32's bytes
    scales[scales == 0] = 1.0
    records[("v", 0)] = np.round(matrix / scales[:, None]).astype(np.int8).tobytes()
    starts = [n for n, idx in enumerate(owners) if n == 0 or owners[n - 1] != idx]  # an entry's rows are contiguous
    return {"model": embedder.name, "fingerprint": embedder.fingerprint, "dim": embedder.dim,
            "rows": len(owners), "owners": owners, "starts": starts, "scales": scales.tolist()}


VECTOR_CACHE_LINES = 200_000   # texts kept in the per-embedder vector cache (about 300 MB for MiniLM)


def _embed_reusing(embedder, texts: list):
    """`embedder.encode(texts)`, re-using the vectors of texts an earlier build embedded.

    The whole MiniLM model costs 15 to 50 ms a line on two cores, so the first build
    of the shipped KB takes seconds to a minute; after that an edit re-embeds only
    the lines it changed. Vectors are cached per embedder, keyed by the exact text.
    """
    import os

    import numpy as np

    from kb_tools.core import cache
    path = os.path.join(cache.cache_dir(), f"{embedder.name}.vectors.marshal")
    key = (embedder.name, embedder.dim, embedder.fingerprint)
    known = (cache.read_value(path, key) or {}) if cache.enabled() else {}
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    if missing:
        if len(missing) >= 100 and getattr(embedder, "slow", False):
            print(f"kb: embedding {len(missing)} entry lines with {embedder.name} for the search index "
                  "(once: later builds re-use them)...", file=sys.stderr, flush=True)
        known.update((t, v.tobytes()) for t, v in zip(missing, embedder.encode(missing)))
        if cache.enabled():
            keep = dict(list(known.items())[-VECTOR_CACHE_LINES:])
            keep.update((t, known[t]) for t in texts)
            cache.write_value(path, key, keep)
    return np.array([np.frombuffer(known[t], dtype=np.float32) for t in texts],
                    dtype=np.float32).reshape(len(texts), embedder.dim)


def build_index(kb, embedder=None, dense: bool = True):
    """The search index of an already loaded KB, in memory (for tests and evaluation); its entry
    vectors come from `embedder`, by default the one `kb search` would use (none with `dense` off)."""
    from kb_tools.core.cache import Table
    return Table(*index_parts(kb, embedder, dense))


def _build(root: str, use_cache: bool) -> tuple:
    """The index parts of the KB at `root`, parsed (or read from its own cache) on a cache miss."""
    from kb_tools.core.load import load_kb
    return index_parts(load_kb(root, use_cache=use_cache))


def load_index(kb_root: str | None = None, dense: bool = True):
    """The search index of the KB at `kb_root`, from cache unless a KB file changed.

    An index whose entry vectors came from another embedder than the one this
    process would query with (numpy was missing, or the model package was
    installed or removed since) is rebuilt once by a dense search; the lexical
    path never checks.
    """
    from kb_tools.core.cache import cached_table
    if not dense:
        return cached_table(kb_root, "search-index", index_version(), _build)

    def stale(header) -> bool:
        embedder = embedders.load()
        dense = header.get("dense") or {}
        made_by = (dense.get("model"), dense.get("fingerprint"))
        return (not header["problems"] and embedder is not None
                and made_by != (embedder.name, embedder.fingerprint) and embedder.can_build())
    return cached_table(kb_root, "search-index", index_version(), _build, stale=stale)


BUILT_WITH_KEPT = 4  # embedders passed to index_parts that queries may still need (tests, evaluations)
_BUILT_WITH = {}  # (name, fingerprint) -> an embedder a caller passed to index_parts, the newest last


def _remember(embedder) -> None:
    """Keep the embedder that built an index, so its queries are embedded by the very same object;
    only the last few are kept, so a long evaluation that builds many indexes does not pile them up."""
    key = (embedder.name, embedder.fingerprint)
    _BUILT_WITH.pop(key, None)
    _BUILT_WITH[key] = embedder
    while len(_BUILT_WITH) > BUILT_WITH_KEPT:
        del _BUILT_WITH[next(iter(_BUILT_WITH))]


def dense_unavailable(index) -> str | None:
    """Why the dense side cannot rank with this index (None when it can)."""
    if embedders.load() is None:
        return "the packaged token vectors are missing or unreadable"
    dense = index.header.get("dense")
    if dense is None:
        from importlib.util import find_spec
        return "numpy is not installed" if find_spec("numpy") is None else "the index holds no entry vectors"
    if index_embedder(dense) is None:
        return f"the index's entry vectors come from {dense.get('model')} files that cannot be loaded or have changed"
    return None


def index_embedder(dense):
    """The embedder that made an index's entry vectors, to embed queries with; None when it cannot
    be loaded, or when its files changed since (vectors of other files are not comparable)."""
    if not dense:
        return None
    key = (dense.get("model"), dense.get("fingerprint"))
    if key in _BUILT_WITH:
        return _BUILT_WITH[key]
    embedder = embedders.load(key[0])
    return embedder if embedder is not None and embedder.fingerprint == key[1] else None
