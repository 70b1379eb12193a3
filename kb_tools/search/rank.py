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
import sys

from kb_tools.core.util import UsageError

MAX_QUERY_CHARS = 10_000
MAX_CORRECTED_WORD = 48    # longer words are not typos: their one-edit variants alone would cost seconds
INDEX_VERSION = 13

# How much a term in each field counts: symptoms are what users type. BM25's k1 and the check's weight
# were set on 800 of the self-written reports (scripts/data/synthetic_reports.yaml; lexical MRR 0.725 ->
# 0.739), then confirmed on the real-report dev split (lexical 0.752 -> 0.773, fused 0.826 -> 0.830).
FIELD_WEIGHTS = {
    "symptoms": 3.0, "title": 2.5, "aliases": 3.0, "tags": 1.5,
    "cause": 1.0, "fix": 0.7, "check": 0.2, "correction": 0.4,
}
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

STOP_WORDS = frozenset("""
a an the of to in on at for from by with and or but if then than so as is are was were be been being
it its it's this that these those there here i me my we our you your he she they them their
do does did doing done have has had having can could would should will shall may might must
when while after before during about into over under again very just also only even still
what which who whom how why where all any some each other such more most much many few
get gets got getting seem seems seemed look looks looked like run runs running ran
""".split())

# Tokenising uses str methods, not `re`: importing `re` costs a cached search
# more than half of Python's own start-up on a slow machine.
_WORD_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789'._"
_TO_SPACE = {c: " " for c in range(0x250) if chr(c) not in _WORD_CHARS + "+-/"}
_SPECIAL = frozenset(("+inf", "-inf", "1/n", "-100"))  # meaningful as written: "-100" is ignore_index


def _space_ideographs(text: str) -> str:
    """Each CJK ideograph as a word of its own, as BERT splits them: Chinese has no spaces, and
    the synonym groups name Chinese terms as sequences of characters."""
    from kb_tools.search.embedders.static import is_cjk
    return "".join(f" {ch} " if is_cjk(ord(ch)) else ch for ch in text)


def _raw_tokens(text: str):
    """Runs of letters, digits and inner `'._`, plus the few signed or slashed tokens of _SPECIAL."""
    text = text.translate(_TO_SPACE)
    if not text.isascii():
        text = _space_ideographs(text)
    for chunk in text.split():
        if chunk.rstrip("._'") in _SPECIAL:
            yield chunk.rstrip("._'")
            continue
        for piece in chunk.replace("+", " ").replace("-", " ").replace("/", " ").split():
            piece = piece.strip("._'")
            if piece:
                yield piece


# (suffix, replacement, shortest word it applies to), tried in order; the site's search reads them too.
STEM_RULES = (("ies", "y", 5), ("ing", "", 6), ("ed", "", 5), ("es", "", 6), ("ly", "", 6), ("s", "", 4))


def _stem(word: str) -> str:
    """A light, predictable suffix stripper: both sides of the match use it, so it need not be perfect."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, repl, min_len in STEM_RULES:
        if word.endswith(suffix) and len(word) >= min_len and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + repl
    return word


STOP_STEMS = frozenset(_stem(w) for w in STOP_WORDS)  # "does" is compared as its stem "doe"


def _words(text: str) -> list:
    """Lower-cased, stemmed words; `loss.backward` gives the compound and its parts."""
    text = text.lower().replace("n't", " not").replace("\u2019", "'")
    out = []
    for raw in _raw_tokens(text):
        if "." in raw or "_" in raw:  # opt.zero_grad -> opt.zero_grad, opt, zero_grad, zero, grad
            out.append(raw)
            for segment in raw.split("."):
                if "_" in segment and segment != raw:
                    out.append(segment)
                out.extend(_stem(p) for p in segment.replace("'", "_").split("_") if p)
        else:
            out.append(_stem(raw))
    return out


def build_phrase_table(groups) -> dict:
    """(stemmed word, ...) -> concept term, for every phrase of every synonym group."""
    table = {}
    for group in groups:
        concept = "~" + "-".join(_words(group[0]))
        for phrase in group:
            key = tuple(_words(phrase))
            if key:
                table.setdefault(key, concept)
    return table


def terms(text: str, phrases: dict, longest: int) -> list:
    """The match terms of `text`: concept terms for known phrases, stemmed words otherwise."""
    words = _words(text)
    out, i = [], 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):
            concept = phrases.get(tuple(words[i:i + n]))
            if concept:
                out.append(concept)
                i += n
                break
        else:
            if words[i] not in STOP_STEMS:
                out.append(words[i])
            i += 1
    return out


# ---------------------------------------------------------------- index

def index_parts(kb, embedder=None, dense: bool = True) -> tuple:
    """The index as (header, records): plain, marshal-able data.

    The header holds what every query needs (ids, phrase table, lengths, areas
    and tags for filters); records hold what a query reads selectively:
    ("p", term) -> (IDF, postings [(entry, weighted tf)]), ("e", entry) -> (title,
    symptoms, each symptom's terms, each symptom's IDF mass). A term is known when
    it has a "p" record; its IDF is read with its postings, so opening the index
    never decodes the whole vocabulary.
    """
    phrases = build_phrase_table(kb.synonyms)
    longest = max((len(k) for k in phrases), default=1)
    ids, areas, tags, lengths, postings, records = [], [], [], [], {}, {}
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
    for idx in range(len(ids)):  # each symptom line's IDF mass, summed once here instead of per query
        title, symptoms, line_terms = records[("e", idx)]
        records[("e", idx)] = (title, symptoms, line_terms, [sum(idf[t] for t in line) for line in line_terms])
    records.update((("p", term), (idf[term], p)) for term, p in postings.items())
    header = {"ids": ids, "areas": areas, "tags": tags, "lengths": lengths,
              "phrases": phrases, "longest": longest, "problems": [str(p) for p in kb.problems],
              "avg_length": (sum(lengths) / len(lengths)) if lengths else 1.0, "dense": None}
    if embedder is not None:  # queries against this index are embedded by this very object
        _BUILT_WITH[(embedder.name, embedder.fingerprint)] = embedder
    if dense and not kb.problems:  # validate first, index second: vectors only for a KB whose fields are sound
        header["dense"] = _dense_parts(kb, records, embedder or _embedder())
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


def load_index(kb_root: str | None = None, dense: bool = True):
    """The search index of the KB at `kb_root`, from cache unless a KB file changed.

    An index whose entry vectors came from another embedder than the one this
    process would query with (numpy was missing, or the model package was
    installed or removed since) is rebuilt once by a dense search; the lexical
    path never checks.
    """
    from kb_tools.core.cache import cached_table
    if not dense:
        return cached_table(kb_root, "search-index", INDEX_VERSION, index_parts)

    def stale(header) -> bool:
        embedder = _embedder()
        dense = header.get("dense") or {}
        made_by = (dense.get("model"), dense.get("fingerprint"))
        return (not header["problems"] and embedder is not None
                and made_by != (embedder.name, embedder.fingerprint) and embedder.can_build())
    return cached_table(kb_root, "search-index", INDEX_VERSION, index_parts, stale=stale)


_EMBEDDERS = {}  # embedder name (None: the preferred one) -> embedder or None, loaded once per process
_BUILT_WITH = {}  # (name, fingerprint) -> an embedder a caller passed to index_parts


def _embedder(name: str | None = None):
    """The sentence embedder called `name`, or by default the one an index is built with: the
    packaged static token vectors, or the whole MiniLM model where $KB_MODEL_DIR names its files;
    None when neither loads (the ranking is then lexical). A query is embedded by whichever
    made the index."""
    if name not in _EMBEDDERS:
        from kb_tools.search.embedders import static as embed
        preferred = _EMBEDDERS.get(None)
        if name is None:
            model = embed.load_model() if embed.model_dir() else None
            if model is None and embed.model_dir():  # named, yet unreadable: say so, once
                print(f"kb: the MiniLM model files in {embed.model_dir()} are missing or damaged; "
                      "searching with the static token vectors", file=sys.stderr)
            _EMBEDDERS[None] = model or embed.load()
        elif preferred is not None and preferred.name == name:
            _EMBEDDERS[name] = preferred
        else:
            loaders = {embed.MiniLMEncoder.name: embed.load_model, embed.StaticEmbedder.name: embed.load}
            _EMBEDDERS[name] = loaders[name]() if name in loaders else None
    return _EMBEDDERS[name]


def dense_unavailable(index) -> str | None:
    """Why the dense side cannot rank with this index (None when it can)."""
    if _embedder() is None:
        return "the packaged token vectors are missing or unreadable"
    dense = index.header.get("dense")
    if dense is None:
        from importlib.util import find_spec
        return "numpy is not installed" if find_spec("numpy") is None else "the index holds no entry vectors"
    if _index_embedder(dense) is None:
        return f"the index's entry vectors come from {dense.get('model')} files that cannot be loaded or have changed"
    return None


def _index_embedder(dense):
    """The embedder that made an index's entry vectors, to embed queries with; None when it cannot
    be loaded, or when its files changed since (vectors of other files are not comparable)."""
    if not dense:
        return None
    key = (dense.get("model"), dense.get("fingerprint"))
    if key in _BUILT_WITH:
        return _BUILT_WITH[key]
    embedder = _embedder(key[0])
    return embedder if embedder is not None and embedder.fingerprint == key[1] else None


# ---------------------------------------------------------------- typos

_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _one_edit(word: str):
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    for a, b in splits:
        if b:
            yield a + b[1:]
            for c in _LETTERS:
                yield a + c + b[1:]
        if len(b) > 1:
            yield a + b[1] + b[0] + b[2:]
        for c in _LETTERS:
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
        term = vocab.get(candidate) or vocab.get(_stem(candidate))
        if term:
            found[candidate] = term
    if found:  # the commoner term wins a tie: a typo is more likely of a common word
        best = found[max(found, key=lambda w: (-idf(found[w]), w))]
        return _words(best) if "_" in best or "." in best else [best]  # a compound and its parts
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
        _, _, line_terms, masses = shown[idx]
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
    from kb_tools.search.embedders.static import basic_words
    vocab = embedder.vocab
    return any(len(w) > 2 and w in vocab and _stem(w) not in STOP_STEMS for w in basic_words(query))


def dense_scores(index, query: str, allowed: set | None = None) -> dict:
    """{entry: (best cosine, its line)}: the query against each entry's title and symptom lines.

    Pure Python for a KB of the shipped size; numpy where the matrix is so
    large that its import costs less than the loop (DENSE_NUMPY_ROWS), or where
    the query's embedder (the whole model) has imported it anyway.
    """
    dense = index.header.get("dense")
    embedder = _index_embedder(dense)
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
            near and _has_known_word(query, _index_embedder(head["dense"]))):
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
    allowed = None
    if area is not None or tag is not None:
        tag = tag.lower() if tag else None
        head = index.header
        known = {t for tags in head["tags"] for t in tags}
        if tag is not None and tag not in known:  # a typo or a retired tag, like --area's invalid choice
            from kb_tools.core.util import did_you_mean
            raise QueryError(f"unknown tag '{tag}'{did_you_mean(tag, known)}: the tags are listed in kb/tags.yaml")
        allowed = {i for i, (a, tags) in enumerate(zip(head["areas"], head["tags"]))
                   if (area is None or a == area) and (tag is None or tag in tags)}
    return rank(index, query, limit=limit, allowed=allowed, dense=dense)


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
