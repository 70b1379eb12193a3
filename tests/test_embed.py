"""The dense side of search: BERT WordPiece as the model saw it, and the fallback when it is missing."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kb_tools import embed

np = pytest.importorskip("numpy")
EMBEDDER = embed.load()


def test_packaged_vectors_load():
    assert EMBEDDER is not None and EMBEDDER.dim == 256
    assert len(EMBEDDER.scales) == len(EMBEDDER.vocab) > 29_000


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
    assert embed.basic_words(text) == words


def test_wordpiece_is_greedy_longest_match_and_all_or_nothing():
    vocab = {"un": 0, "##aff": 1, "##able": 2, "##a": 3, "[UNK]": 4}
    assert embed.wordpiece("unaffable", vocab) == ["un", "##aff", "##able"]
    assert embed.wordpiece("unaffablez", vocab) == ["[UNK]"]
    assert embed.wordpiece("x" * 101, {"x": 0, "##x": 1}) == ["[UNK]"]


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
