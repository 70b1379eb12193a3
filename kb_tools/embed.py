"""Static sentence embeddings for the dense side of `kb search`, with no torch and no download.

A sentence's vector is the mean of its WordPiece tokens' vectors, L2-normalised.
The token vectors were distilled once from all-MiniLM-L6-v2 (each token run
through the model alone, then PCA, as model2vec does; see
`kb_tools/embeddings/README.md` and `bench/distill_embeddings.py`), so a query
costs a tokenizer pass and a few row lookups instead of a transformer. The
tokenizer is BERT's uncased WordPiece, written out here because the `tokenizers`
package would cost more to import than the whole lookup.

A query is embedded in pure Python; building the index embeds every entry line
with numpy. `load()` returns None when the packaged files are missing, and the
caller falls back to the lexical ranking.
"""
from __future__ import annotations

import os
import unicodedata

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "embeddings")
TOKENS_FILE = "static-minilm.tokens"
ROWS_FILE = "static-minilm.int8"           # raw int8, one row of DIM values per token
SCALES_FILE = "static-minilm.scale.f32"    # raw float32 (native order, little-endian), each row's factor
MAX_WORD_CHARS = 100       # WordPiece's own limit: a longer "word" is one unknown token
MAX_TOKENS = 512           # the model's context: tokens past it add nothing to the mean
UNK = "[UNK]"


def _is_punctuation(ch: str) -> bool:
    """BERT's rule: ASCII symbols count as punctuation even where Unicode says otherwise ('$', '^', '`')."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp: int) -> bool:
    """A CJK ideograph: BERT, and the lexical side of `kb search`, treat each one as a word of its own."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_words(text: str) -> list:
    """BERT's normaliser and pre-tokenizer: clean, lower-case, strip accents, split off punctuation."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch in "\t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf"):
            continue
        elif is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    text = unicodedata.normalize("NFD", "".join(out).lower())
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    words = []
    for chunk in text.split():
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punctuation(ch):
                if i > start:
                    words.append(chunk[start:i])
                words.append(ch)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


def wordpiece(word: str, vocab: dict) -> list:
    """Greedy longest-match-first pieces of one word; the whole word is unknown if any part is."""
    if len(word) > MAX_WORD_CHARS:
        return [UNK]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                break
            end -= 1
        else:
            return [UNK]
        start = end
    return pieces


class StaticEmbedder:
    """Token table plus tokenizer.

    `encode_query` is pure Python (a query reads a few rows; importing numpy
    would cost more than the whole search), `encode` uses numpy for the many
    texts of an index build. Both give the same unit-length vectors.
    """

    def __init__(self, tokens: list, rows_path: str, scales, dim: int):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.rows_path, self.scales, self.dim = rows_path, scales, dim

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
        with open(self.rows_path, "rb") as fh:  # a query reads its tokens' rows, not the 7 MB table
            for i in ids:
                fh.seek(i * dim)
                row = array("b", fh.read(dim))
                if len(row) != dim:
                    return []
                scale = self.scales[i]
                total = [t + scale * r for t, r in zip(total, row)]
        norm = sum(t * t for t in total) ** 0.5
        return [t / norm for t in total] if norm > 0 else []

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
    return StaticEmbedder(tokens, rows_path, scales, rows_size // len(tokens))
