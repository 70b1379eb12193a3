"""BERT's uncased WordPiece tokenizer, written out: the `tokenizers` package would cost more to
import than a whole query. Shared by every embedder of the MiniLM family (the static token
table and the whole model) and by the lexical side's CJK splitting."""
from __future__ import annotations

import unicodedata

MAX_WORD_CHARS = 100       # WordPiece's own limit: a longer "word" is one unknown token
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
