"""The docs site's search: `kb search`'s index with the static token vectors, exported as static files.

The browser embeds a query with the static vectors (kb_tools/embeddings), never the
whole MiniLM model (90 MB of weights), so the exported entry vectors come from them too.

`files(kb)` returns what `kb build` adds under the site's `search/` folder:

    search/kb-index.json    search_index.index_parts(kb) as JSON: ids, titles, areas, IDF,
                            phrase table, lengths, postings, symptom lines and their
                            terms, entry vectors (int8 + scales), the ranking constants,
                            stop words and stemming rules, all read from kb_tools.search
                            at build time
    search/kb-search.js     the ranking ported to JavaScript, plus the search box
    search/kb-search.css
    search/static-minilm.*  the packaged token table (kb_tools/embeddings), fetched by
                            the browser on the first search only

The JavaScript holds no ranking constant of its own: whatever kb_tools/search/rank.py
says at build time is what the site uses. When the entry vectors or the token
table are missing, the index says so (`dense: null`) and the site ranks by words
only, as `kb search` does.

The token table is the packaged one, whole (1.1 MB: 7,988 tokens x 128 int8 dimensions): a
copy for the site alone would rank differently from `kb search`, so the table was made small
for both (scripts/prune_embeddings.py; kb_tools/embeddings/README.md, step 5). Every file here
together stays under 2 MB, which a test holds.
"""
from __future__ import annotations

import base64
import json
import os
import sys

from kb_tools.search.embedders import static as embed
from kb_tools.search.embedders import wordpiece
from kb_tools.search import answer as search_answer
from kb_tools.search import index as search_index
from kb_tools.search import rank as search_rank
from kb_tools.search import tokenize as search_tokenize

INDEX_FILE = "search/kb-index.json"
SCRIPT, STYLE = "kb-search.js", "kb-search.css"  # in site_templates/, copied to search/
FORMAT = 1

# kb_tools.search.rank constants the ranking reads; each is exported by name, never copied into the JS.
ANSWER_CONSTANTS = ("CLOSE_SHARE", "DIFFERENTIAL_SIZE", "SCOPE_CONFIDENCE")  # kb_tools.search.answer's
CONSTANTS = ("BM25_K1", "BM25_B", "LINE_BONUS", "CANDIDATES", "VAGUE_IDF", "TRIAGE_PRIOR", "LOW_CONFIDENCE",
             "LEXICAL_SHARE", "DENSE_BASELINE_RANK", "DENSE_CONFIDENCE", "DENSE_FLOOR", "MAX_QUERY_CHARS", "MAX_CORRECTED_WORD")


def index_data(kb, table: dict | None, data_dir: str = embed.DATA_DIR) -> dict:
    """The JSON-ready search index of `kb`, from `search_index.index_parts` (one source of truth);
    `table` is the token table the browser will read (see `_token_files`), None for words only."""
    # the browser embeds a query with the static token vectors, so the entries' vectors must come from them too
    header, records = search_index.index_parts(kb, embedder=embed.load(data_dir) if table else None, dense=bool(table))
    terms = [name for kind, name in records if kind == "p"]  # a list, not an object: JS would reorder "10"
    postings = [[x for idx, tf in records[("p", t)][1] for x in (idx, tf)] for t in terms]
    n = len(header["ids"])
    entries = [records[("e", i)] for i in range(n)]
    data = {
        "format": FORMAT,
        "constants": {**{name: getattr(search_rank, name) for name in CONSTANTS},
                      **{name: getattr(search_answer, name) for name in ANSWER_CONSTANTS}},
        # Python 3.12's sum() of floats is compensated (Neumaier); the port adds the way this Python does
        "compensated_sum": sys.version_info >= (3, 12),
        "stop_stems": sorted(search_tokenize.STOP_STEMS),
        "stem_rules": [list(r) for r in search_tokenize.STEM_RULES],
        "word_chars": search_tokenize.WORD_CHARS, "special": sorted(search_tokenize.SPECIAL_TOKENS),
        "letters": search_rank.SPELLING_LETTERS,
        "ids": header["ids"], "areas": header["areas"],
        "titles": [e[0] for e in entries], "symptoms": [e[1] for e in entries], "checks": [e[4] for e in entries],
        "scope": {"covers": search_answer.COVERS,
                  "topics": [[name, phrases] for name, phrases in search_answer.SCOPE_TOPICS.values()]},
        "line_terms": [e[2] for e in entries],
        "terms": terms, "idf": [records[("p", t)][0] for t in terms], "postings": postings,
        "phrases": [[list(k), v] for k, v in header["phrases"].items()], "longest": header["longest"],
        "lengths": header["lengths"], "avg_length": header["avg_length"],
        "dense": None, "embed": None,
    }
    dense = header.get("dense")
    if dense and table:
        data["dense"] = {"dim": dense["dim"], "rows": dense["rows"], "owners": dense["owners"],
                         "starts": dense["starts"], "scales": dense["scales"],
                         "vectors": base64.b64encode(records[("v", 0)]).decode("ascii")}
        data["embed"] = {"tokens": embed.TOKENS_FILE, "rows": embed.ROWS_FILE, "scales": embed.SCALES_FILE,
                         "dim": dense["dim"], "unk": wordpiece.UNK, "max_tokens": embed.MAX_TOKENS,
                         "max_word_chars": wordpiece.MAX_WORD_CHARS,
                         "bytes": sum(len(b) for b in table.values())}
    return data


def _token_files(data_dir: str) -> dict | None:
    """{file name: bytes} of the packaged token table, or None when any part is missing."""
    out = {}
    for name in (embed.TOKENS_FILE, embed.ROWS_FILE, embed.SCALES_FILE):
        try:
            with open(os.path.join(data_dir, name), "rb") as fh:
                out[name] = fh.read()
        except OSError:
            return None
    return out


def files(kb, templates: str, data_dir: str = embed.DATA_DIR) -> dict:
    """Every file the site's search needs: path under the docs folder -> str or bytes."""
    table = _token_files(data_dir)
    data = index_data(kb, table, data_dir)
    out = {INDEX_FILE: json.dumps(data, ensure_ascii=False, separators=(",", ":"))}
    for name in (SCRIPT, STYLE):
        with open(os.path.join(templates, name), encoding="utf-8") as fh:
            out[f"search/{name}"] = fh.read()
    if data["embed"] and table:
        for name, blob in table.items():
            out[f"search/{name}"] = blob
    return out
