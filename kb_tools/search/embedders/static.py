"""Static sentence embeddings for the dense side of `kb search`, with no torch and no download.

A sentence's vector is the mean of its WordPiece tokens' vectors, L2-normalised.
The token vectors were distilled once from all-MiniLM-L6-v2 (each token run
through the model alone, then PCA, as model2vec does; see
`kb_tools/embeddings/README.md` and `bench/distill_embeddings.py`), so a query
costs a tokenizer pass (wordpiece.py) and a few row lookups instead of a transformer.

A query is embedded in pure Python; building the index embeds every entry line
with numpy. `load()` returns None when the packaged files are missing, and the
caller falls back to the lexical ranking.
"""
from __future__ import annotations

import os

from kb_tools import PACKAGE_DIR
from kb_tools.search.embedders.wordpiece import UNK, basic_words, wordpiece

DATA_DIR = os.path.join(PACKAGE_DIR, "embeddings")
TOKENS_FILE = "static-minilm.tokens"
ROWS_FILE = "static-minilm.int8"           # raw int8, one row of DIM values per token
SCALES_FILE = "static-minilm.scale.f32"    # raw float32 (native order, little-endian), each row's factor
MAX_TOKENS = 512           # the model's context: tokens past it add nothing to the mean


class StaticEmbedder:
    """Token table plus tokenizer.

    `encode_query` is pure Python (a query reads a few rows; importing numpy
    would cost more than the whole search), `encode` uses numpy for the many
    texts of an index build. Both give the same unit-length vectors.
    """

    name = "static-minilm"

    def __init__(self, tokens: list, rows_path: str, scales, dim: int, fingerprint: str = ""):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.rows_path, self.scales, self.dim = rows_path, scales, dim
        self.fingerprint = fingerprint  # which files: vectors cached from others are never re-used

    def token_ids(self, text: str) -> list:
        vocab, ids = self.vocab, []
        unk = vocab.get(UNK)
        for word in basic_words(text):
            for piece in wordpiece(word, vocab):
                i = vocab.get(piece, unk)
                if i != unk:
                    ids.append(i)
                    if len(ids) >= MAX_TOKENS:
                        return ids
        return ids

    def encode_query(self, text: str) -> list:
        """One text's unit vector as a list of floats ([] when no token of it is known)."""
        from array import array
        ids = self.token_ids(text)
        if not ids:
            return []
        dim, total = self.dim, [0.0] * self.dim
        with open(self.rows_path, "rb") as fh:  # a query reads its tokens' rows, not the whole table
            for i in ids:
                fh.seek(i * dim)
                row = array("b", fh.read(dim))
                if len(row) != dim:
                    return []
                scale = self.scales[i]
                total = [t + scale * r for t, r in zip(total, row)]
        norm = sum(t * t for t in total) ** 0.5
        return [t / norm for t in total] if norm > 0 else []

    def can_build(self) -> bool:
        """Whether an index build can embed entries with this embedder (it needs numpy)."""
        return available(os.path.dirname(self.rows_path))

    def encode(self, texts):
        """A float32 numpy matrix, one unit row per text (zeros for a text with no known token)."""
        import numpy as np
        table = np.fromfile(self.rows_path, dtype=np.int8).reshape(-1, self.dim)
        scales = np.asarray(self.scales, dtype=np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for n, text in enumerate(texts):
            ids = self.token_ids(text)
            if ids:
                v = (table[ids].astype(np.float32) * scales[ids, None]).sum(axis=0)
                norm = float(np.sqrt(v @ v))
                if norm > 0:
                    out[n] = v / norm
        return out


def available(data_dir: str = DATA_DIR) -> bool:
    """Whether an index build can embed entries: numpy (found, not imported) and the token table."""
    from importlib.util import find_spec
    return find_spec("numpy") is not None and os.path.isfile(os.path.join(data_dir, ROWS_FILE))


def load(data_dir: str = DATA_DIR) -> StaticEmbedder | None:
    """The packaged embedder, or None when its files are missing or do not fit together."""
    from array import array
    rows_path = os.path.join(data_dir, ROWS_FILE)
    try:
        with open(os.path.join(data_dir, TOKENS_FILE), encoding="utf-8") as fh:
            tokens = fh.read().split("\n")
        scales = array("f")
        with open(os.path.join(data_dir, SCALES_FILE), "rb") as fh:
            scales.frombytes(fh.read())
        rows_size = os.stat(rows_path).st_size
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if tokens and tokens[-1] == "":
        tokens.pop()
    if not tokens or len(scales) != len(tokens) or rows_size % len(tokens):
        return None
    return StaticEmbedder(tokens, rows_path, scales, rows_size // len(tokens),
                          files_fingerprint(data_dir, (TOKENS_FILE, ROWS_FILE, SCALES_FILE)))


def files_fingerprint(directory: str, names) -> str:
    """Size and mtime of each file, as one string: what an index's vectors were made from.

    A stat, not a hash, because a search checks it: replaced files (a new table, another
    model) give another fingerprint, so cached vectors from the old ones are rebuilt, never
    compared with a query embedded by the new ones."""
    parts = []
    for name in names:
        try:
            st = os.stat(os.path.join(directory, name))
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{name}:missing")
    return "|".join(parts)
