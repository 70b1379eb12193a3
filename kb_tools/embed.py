"""Static sentence embeddings for the dense side of `kb search`, with no torch and no download.

A sentence's vector is the mean of its WordPiece tokens' vectors, L2-normalised.
The token vectors were distilled once from all-MiniLM-L6-v2 (each token run
through the model alone, then PCA, as model2vec does; see
`kb_tools/embeddings/README.md` and `bench/distill_embeddings.py`), so a query
costs a tokenizer pass and a few row lookups instead of a transformer. The
tokenizer is BERT's uncased WordPiece, written out here because the `tokenizers`
package would cost more to import than the whole lookup.

Only the search path imports this module, and only when the dense side is used;
numpy is its one dependency. `load()` returns None when numpy or the vectors are
missing, and the caller falls back to the lexical ranking.
"""
from __future__ import annotations

import os
import unicodedata

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "embeddings")
TOKENS_FILE = "static-minilm.tokens"
VECTORS_FILE = "static-minilm.npy"         # int8, one row per token
SCALES_FILE = "static-minilm.scale.npy"    # float32, the factor of each row
MAX_WORD_CHARS = 100       # WordPiece's own limit: a longer "word" is one unknown token
MAX_TOKENS = 512           # the model's context: tokens past it add nothing to the mean
UNK = "[UNK]"


def _is_punctuation(ch: str) -> bool:
    """BERT's rule: ASCII symbols count as punctuation even where Unicode says otherwise ('$', '^', '`')."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
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
        elif _is_cjk(cp):
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
    """Token table plus tokenizer: `encode(texts)` gives one unit-length row per text."""

    def __init__(self, tokens: list, vectors, scales):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.vectors, self.scales = vectors, scales
        self.dim = vectors.shape[1]

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

    def encode(self, texts):
        """A float32 matrix, one L2-normalised row per text (a text with no known token: zeros)."""
        import numpy as np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = self.token_ids(text)
            if ids:
                v = (self.vectors[ids].astype(np.float32) * self.scales[ids, None]).mean(axis=0)
                norm = float(np.sqrt(v @ v))
                if norm > 0:
                    out[row] = v / norm
        return out


def available(data_dir: str = DATA_DIR) -> bool:
    """Whether `load()` can work, checked without importing numpy (the lexical path never does)."""
    from importlib.util import find_spec
    return find_spec("numpy") is not None and os.path.isfile(os.path.join(data_dir, VECTORS_FILE))


def load(data_dir: str = DATA_DIR) -> StaticEmbedder | None:
    """The packaged embedder, or None when numpy or the token table is not there."""
    try:
        import numpy as np
    except ImportError:
        return None
    try:
        with open(os.path.join(data_dir, TOKENS_FILE), encoding="utf-8") as fh:
            tokens = fh.read().split("\n")
        vectors = np.load(os.path.join(data_dir, VECTORS_FILE), mmap_mode="r", allow_pickle=False)
        scales = np.load(os.path.join(data_dir, SCALES_FILE), allow_pickle=False)
    except (OSError, ValueError):
        return None
    if tokens and tokens[-1] == "":
        tokens.pop()
    if vectors.ndim != 2 or vectors.shape[0] != len(tokens) or scales.shape != (len(tokens),):
        return None
    return StaticEmbedder(tokens, vectors, scales)
