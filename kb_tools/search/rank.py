"""Rank entries for a symptom query, from two words to a pasted paragraph or traceback.

This module is on the hot path of `kb search`: it imports nothing heavy at
module level (no torch, jinja2, mkdocs, yaml), and rapidfuzz only when a query
word is unknown to the index and no one-edit spelling fix exists.

The ranking (`rank`) has three parts:
1. Terms: words are lower-cased, lightly stemmed, stop words dropped, and
   phrases from `kb/synonyms.yaml` folded into one concept term, on both the
   entries and the query, so "plateau" finds an entry that says "flat".
2. BM25 over a field-weighted bag of terms (symptoms weigh most), with IDF, so
   a long paragraph is carried by its rare, telling words rather than drowned
   by "model", "training" and "loss".
3. A symptom-line bonus: how much of one symptom line the query covers
   (IDF-weighted). A pasted error message covers its line almost completely.
"""
from __future__ import annotations

import math

from kb_tools.core.util import UsageError
from kb_tools.search.index import index_embedder
from kb_tools.search.tokenize import STOP_STEMS, stem, stemmed_words, terms

MAX_QUERY_CHARS = 10_000
MAX_REPORT_CHARS = 100_000  # a pasted report (kb search -): its text part is ranked up to MAX_QUERY_CHARS
MAX_CORRECTED_WORD = 48    # longer words are not typos: their one-edit variants alone would cost seconds

BM25_K1, BM25_B = 1.6, 0.5
LINE_BONUS = 6.0           # weight of the best symptom-line coverage (0..1, squared)
CANDIDATES = 60            # entries re-ranked with the symptom-line bonus
VAGUE_IDF = 1.0            # a query whose rarest word is this common (in ~40% of entries) is vague
TRIAGE_PRIOR = 1.3         # and lifts the triage entries by this factor
LOW_CONFIDENCE = 35.0      # score under which a hit is marked as a guess
# Fusion: LEXICAL_SHARE * lexical score / the best one, plus the rest times the dense cosine rescaled so
# that the best entry's is 1 and the one at DENSE_BASELINE_RANK (the 21st) or lower is 0. Scores, not
# ranks: the adapted vectors' cosines are calibrated (see below), and 5-fold cross-validation on the
# real-report dev split prefers this to reciprocal-rank fusion (bench/search_cv.py, BENCHMARKS.md).
LEXICAL_SHARE = 0.5
DENSE_BASELINE_RANK = 20
# Confidence of a dense match: DENSE_CONFIDENCE * (cosine - DENSE_FLOOR), so a dense match alone clears
# LOW_CONFIDENCE from cosine 0.65 up. With the shipped static vectors, the top dense hit of the real-report
# dev split is right 90% of the time from 0.65 up (56 of 62 queries), 79% from 0.45 and in all 15 from 0.80
# (the whole model: 76%, 61% and 12 of 12); unrelated text ("how do I bake bread") scores under 0.35.
DENSE_CONFIDENCE = 100.0
DENSE_FLOOR = 0.30
DENSE_NUMPY_ROWS = 4000    # from this many entry lines on, numpy's import costs less than a Python loop


# ---------------------------------------------------------------- typos

SPELLING_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _one_edit(word: str):
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    for a, b in splits:
        if b:
            yield a + b[1:]
            for c in SPELLING_LETTERS:
                yield a + c + b[1:]
        if len(b) > 1:
            yield a + b[1] + b[0] + b[2:]
        for c in SPELLING_LETTERS:
            yield a + c + b


def spelling_vocab(index) -> dict:
    """Word -> the term it stands for: index words as themselves, synonym words as their concept."""
    vocab = {t: t for t in index.names("p") if t[0] not in "~="}
    for phrase, concept in index.header["phrases"].items():
        if len(phrase) == 1:
            vocab.setdefault(phrase[0], concept)
    return vocab


def term_idf(index, term: str, default: float = 0.0) -> float:
    """The IDF of an indexed term (`default` for a term no entry uses)."""
    record = index.get(("p", term))
    return default if record is None else record[0]


def correct(word: str, vocab: dict, idf) -> list:
    """The terms a misspelt or run-together query word most likely meant ([] if none).

    One edit (delete, swap, replace, insert) first; then two words run together
    ("crossentropy"); then, for long words only, rapidfuzz at distance two.
    """
    if not 4 <= len(word) <= MAX_CORRECTED_WORD or not word.isalpha():
        return []
    found = {}
    for candidate in set(_one_edit(word)):  # "vanishng" -> "vanishing", indexed as its stem "vanish"
        term = vocab.get(candidate) or vocab.get(stem(candidate))
        if term:
            found[candidate] = term
    if found:  # the commoner term wins a tie: a typo is more likely of a common word
        best = found[max(found, key=lambda w: (-idf(found[w]), w))]
        return stemmed_words(best) if "_" in best or "." in best else [best]  # a compound and its parts
    for cut in range(3, len(word) - 2):
        head, tail = word[:cut], word[cut:]
        if head in vocab and tail in vocab:
            return [vocab[head], vocab[tail]]
    if len(word) < 7:
        return []
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein
    candidates = [w for w in vocab if w.isalpha() and abs(len(w) - len(word)) <= 2]
    best = process.extractOne(word, candidates, scorer=Levenshtein.distance, score_cutoff=2)
    return [vocab[best[0]]] if best else []


# ---------------------------------------------------------------- ranking

class QueryError(UsageError):
    """The query itself is unusable (empty, or too long to be a query)."""


class Hit:
    """One ranked entry, best first; `score` (0-100) says how well it explains the query.

    The best hit's score is a confidence a person can read: half how much of
    the query the entry explains, half how much of its best symptom line the
    query holds. Later hits scale it by their ranking score, so scores fall
    with rank.
    """

    __slots__ = ("id", "title", "area", "score", "matched", "low_confidence")

    def __init__(self, id, title, area, score, matched, low_confidence=False):
        self.id, self.title, self.area, self.score = id, title, area, score
        self.matched, self.low_confidence = matched, low_confidence

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "area": self.area, "score": round(self.score, 1),
                "matched": self.matched, "low_confidence": self.low_confidence}


def validate_query(query: str) -> str:
    query = " ".join(query.split())
    if not query:
        raise QueryError("empty query: describe what you see, e.g. kb search \"loss flat\"")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query


def query_terms(query: str, index) -> dict:
    """Query term -> count, with misspelt words replaced by their index spelling."""
    head = index.header
    counts, vocab = {}, None
    for term in terms(query, head["phrases"], head["longest"]):
        found = [term]
        if not index.has(("p", term)):
            vocab = vocab or spelling_vocab(index)
            found = correct(term, vocab, lambda t: term_idf(index, t)) or found
        for t in found:
            counts[t] = counts.get(t, 0) + 1
    for word in query.lower().split():  # an alias typed as is: "O12", "o12"
        if index.has(("p", "=" + word)):
            counts["=" + word] = 1
    return counts


def lexical_scores(index, q: dict, allowed: set | None = None) -> tuple:
    """BM25 over field-weighted terms, plus the symptom-line bonus for the best CANDIDATES.

    Returns ({entry: (score, best line, confidence)}, records read); confidence
    (0-100) is half how much of the query the entry explains, half how much of its
    best symptom line the query holds.
    """
    head = index.header
    lengths, avg = head["lengths"], head["avg_length"]
    unseen = math.log(1 + (len(lengths) + 0.5) / 0.5)  # the IDF of a word no entry uses
    known = {t: r for t in q if (r := index.get(("p", t))) is not None}  # term -> (IDF, postings)
    idf = {t: r[0] for t, r in known.items()}  # of the query's terms: all a query needs
    query_mass = sum(idf.get(t, unseen) for t in q) or 1.0
    scores, explained = {}, {}
    for term, qtf in q.items():
        if term not in known:
            continue
        weight, postings = known[term]
        qweight = weight * (1 + math.log(qtf))
        for idx, tf in postings:
            norm = tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * lengths[idx] / avg))
            scores[idx] = scores.get(idx, 0.0) + qweight * norm
            explained[idx] = explained.get(idx, 0.0) + weight
    # A query made only of common words ("loss flat") says little about the cause:
    # the first-hour triage checks are then the most useful answer.
    vague = max((idf.get(t, unseen) for t in q), default=unseen) <= VAGUE_IDF
    if allowed is not None:
        scores = {i: s for i, s in scores.items() if i in allowed}
    top = sorted(scores.items(), key=lambda kv: -kv[1])[:CANDIDATES]
    out, shown = {}, {}
    for idx, base in top:
        best_cov, best_line = 0.0, 0
        shown[idx] = index.get(("e", idx))
        line_terms, masses = shown[idx][2:4]
        for n, (line, mass) in enumerate(zip(line_terms, masses)):
            if mass:
                cov = sum(idf.get(t, 0.0) for t in line if t in q) / mass  # share of the line the query holds
                if cov > best_cov:
                    best_cov, best_line = cov, n
        confidence = 50.0 * (min(explained[idx] / query_mass, 1.0) + best_cov)
        score = base + LINE_BONUS * best_cov * best_cov
        if vague and head["areas"][idx] == "triage":
            score *= TRIAGE_PRIOR
        out[idx] = (score, best_line, confidence)
    return out, shown


def _has_known_word(query: str, embedder) -> bool:
    """Whether the query holds a word the embedding model knows whole (not a stop word, not shards of one)."""
    from kb_tools.search.embedders.wordpiece import basic_words
    vocab = embedder.vocab
    return any(len(w) > 2 and w in vocab and stem(w) not in STOP_STEMS for w in basic_words(query))


def dense_scores(index, query: str, allowed: set | None = None) -> dict:
    """{entry: (best cosine, its line)}: the query against each entry's title and symptom lines.

    Pure Python for a KB of the shipped size; numpy where the matrix is so
    large that its import costs less than the loop (DENSE_NUMPY_ROWS), or where
    the query's embedder (the whole model) has imported it anyway.
    """
    dense = index.header.get("dense")
    embedder = index_embedder(dense)
    if embedder is None or not dense["rows"] or dense["dim"] != embedder.dim:
        return {}
    qv = embedder.encode_query(query)
    if not qv:
        return {}
    dim, n_rows, blob = dense["dim"], dense["rows"], index.get(("v", 0))
    scales = dense["scales"]
    if n_rows >= DENSE_NUMPY_ROWS or getattr(embedder, "slow", False):  # the whole model imported numpy
        import numpy as np
        matrix = np.frombuffer(blob, dtype=np.int8).reshape(n_rows, dim)
        sims = ((matrix @ np.asarray(qv, dtype=np.float32)) * np.asarray(scales, dtype=np.float32)).tolist()
    else:
        from operator import mul
        rows = memoryview(blob).cast("b")
        sims = [sum(map(mul, rows[r * dim:(r + 1) * dim], qv)) * scales[r] for r in range(n_rows)]
    owners, out = dense["owners"], {}
    for n, start in enumerate(dense["starts"]):
        idx = owners[start]
        if allowed is not None and idx not in allowed:
            continue
        stop = dense["starts"][n + 1] if n + 1 < len(dense["starts"]) else n_rows
        best = max(range(start, stop), key=sims.__getitem__)
        out[idx] = (sims[best], best - start - 1)  # row 0 of an entry is its title: line -1
    return out


def _fuse(lexical: dict, dense: dict) -> dict:
    """The two sides' scores, each scaled to its query's best, mixed: {entry: fused score}."""
    best_lexical = max((v[0] for v in lexical.values()), default=0.0)
    cosines = sorted((v[0] for v in dense.values()), reverse=True)
    best, baseline = cosines[0], cosines[min(DENSE_BASELINE_RANK, len(cosines) - 1)]
    fused = {}
    if best_lexical > 0:
        for idx, (score, _, _) in lexical.items():
            fused[idx] = LEXICAL_SHARE * score / best_lexical
    spread = best - baseline
    for idx, (cos, _) in dense.items():  # every entry stays a candidate: a query is never left without one
        share = (1 - LEXICAL_SHARE) * (cos - baseline) / spread if spread > 0 and cos > baseline else 0.0
        fused[idx] = fused.get(idx, 0.0) + share
    return fused


def rank(index, query: str, limit: int = 10, allowed: set | None = None, dense: bool = True) -> list:
    """Hits for `query`, best first; `allowed` restricts to a set of entry positions.

    A query with no usable word (stop words, gibberish) gets no hits; any other,
    even one no entry shares a word with ("zebra giraffe"), gets its best
    candidates, marked low-confidence when they explain it poorly.
    """
    query = validate_query(query)
    head = index.header
    q = query_terms(query, index)
    lexical, shown = lexical_scores(index, q, allowed)
    near = dense_scores(index, query, allowed) if dense else {}
    if not any(index.has(("p", t)) for t in q) and not (
            near and _has_known_word(query, index_embedder(head["dense"]))):
        return []
    fused = _fuse(lexical, near) if near else {i: v[0] for i, v in lexical.items()}
    ids = head["ids"]
    order = sorted(fused, key=lambda i: (-fused[i], ids[i]))[:limit]
    hits, top = [], None
    for idx in order:
        _, line, conf_lex = lexical.get(idx, (0.0, None, 0.0))
        cos, dense_line = near.get(idx, (0.0, None))
        conf_dense = DENSE_CONFIDENCE * (cos - DENSE_FLOOR)
        confidence = max(conf_lex, conf_dense)
        if line is None or (conf_lex < conf_dense and dense_line is not None and dense_line >= 0):
            line = dense_line
        if top is None:
            top = (confidence, fused[idx])
        # the best hit scores its confidence; the others, that scaled by their fused score
        score = top[0] * fused[idx] / top[1] if top[1] > 0 else 0.0
        title, symptoms = (shown.get(idx) or index.get(("e", idx)))[:2]
        matched = symptoms[line] if symptoms and line is not None and 0 <= line < len(symptoms) else (
            symptoms[0] if symptoms else "")
        hits.append(Hit(ids[idx], title, head["areas"][idx], score, matched,
                        low_confidence=score < LOW_CONFIDENCE))
    return hits


def search(index, query: str, limit: int = 10, area: str | None = None, tag: str | None = None,
           dense: bool = True) -> list:
    """The ranked hits for `query` among the indexed entries, best first, optionally filtered."""
    return rank(index, query, limit=limit, allowed=allowed_entries(index, area, tag), dense=dense)


def allowed_entries(index, area: str | None = None, tag: str | None = None) -> set | None:
    """Positions of the entries an --area / --tag filter keeps (None: no filter)."""
    if area is None and tag is None:
        return None
    tag = tag.lower() if tag else None
    head = index.header
    known = {t for tags in head["tags"] for t in tags}
    if tag is not None and tag not in known:  # a typo or a retired tag, like --area's invalid choice
        from kb_tools.core.util import did_you_mean
        raise QueryError(f"unknown tag '{tag}'{did_you_mean(tag, known)}: the tags are listed in kb/tags.yaml")
    return {i for i, (a, tags) in enumerate(zip(head["areas"], head["tags"]))
            if (area is None or a == area) and (tag is None or tag in tags)}
