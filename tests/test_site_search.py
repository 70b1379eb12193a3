"""The site's search ranks exactly as `kb search` does, checked without a browser.

The JavaScript of the site (site_templates/kb-search.js) runs under node on the
index that `kb build` exports, for every labelled query, and its hits are compared
with `kb search --json` in Python (kb_tools.search.answer): the same ids in the same order,
the same scores, matched lines, low-confidence marks, tell-apart checks and scope notes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from kb_tools.search import evaluate as search_evaluate
from kb_tools.search import index as search_index
from kb_tools.search import rank as search_rank
from kb_tools.site import search_export as site_search
from kb_tools.core.load import load_kb

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TEMPLATES = os.path.join(REPO, "site_templates")
SCRIPT = os.path.join(TEMPLATES, site_search.SCRIPT)
NODE = shutil.which("node")
# Query files in the `queries: [{query, expect}]` form; real-report sets join when they land.
QUERY_FILES = [p for p in (os.path.join(HERE, "queries.yaml"), os.path.join(HERE, "queries_holdout.yaml"),
                           os.path.join(HERE, "real_reports", "dev.yaml")) if os.path.exists(p)]
# What a query box meets besides labelled queries: typos, run-together words, code, aliases, Unicode.
ODD_QUERIES = [
    "vanishng gradints", "crossentropy loss", "optimzer.zero_grad() not caled", "O12", "o12",
    "labels all -100", "loss 1/n of expected", "loss.backward() after opt.step()", "it doesn’t learn",
    "Ünïcödé lösß stuck at 2.30", "训练 loss 不下降", "accuracy stuck at 10%", "T5 fp16 nan loss after 34 iterations",
    "zebra giraffe", "the and of", "a" * 60, "NaN", "+inf -inf", "\ufeffloss\u2003flat\u00a0", "loss\x1cflat",
]

if NODE is None and os.environ.get("KB_REQUIRE_NODE"):  # CI sets it: there a skip would hide a failure
    raise RuntimeError("KB_REQUIRE_NODE is set but node is not installed")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the parity check runs the site's JS with it)")


def export(kb, tmp_path, data_dir=None) -> str:
    """The site's search/ folder for `kb`, as `kb build` writes it; returns the folder."""
    out = tmp_path / "search"
    out.mkdir()
    kwargs = {} if data_dir is None else {"data_dir": data_dir}
    for rel, data in site_search.files(kb, TEMPLATES, **kwargs).items():
        path = tmp_path / rel
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(out)


def node_rank(folder: str, queries: list, *flags) -> list:
    proc = subprocess.run([NODE, SCRIPT, folder, *flags], input=json.dumps(queries), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    hits = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(hits) == len(queries)
    return hits


def python_rank(index, query: str, dense: bool = True) -> list:
    """`kb search --json`'s array for a one-line query: the hits, with tell_apart and out_of_scope."""
    from kb_tools.search.answer import answer
    try:
        return answer(index, " ".join(query.split()), 10, dense=dense).to_json()  # the site's box holds one line
    except search_rank.QueryError:
        return []


def compare(index, folder: str, queries: list, dense: bool = True) -> dict:
    """Agreement of node's hits with Python's, per query: top-1, top-3 and the whole list."""
    js = node_rank(folder, queries, *([] if dense else ["--lexical"]))
    top1 = top3 = whole = 0
    diffs = []
    for query, got in zip(queries, js):
        want = python_rank(index, query, dense)
        got = [{**h, "score": round(h["score"], 1)} for h in got]
        top1 += [h["id"] for h in got[:1]] == [h["id"] for h in want[:1]]
        top3 += [h["id"] for h in got[:3]] == [h["id"] for h in want[:3]]
        whole += got == want
        if got != want:
            diffs.append((query, [h["id"] for h in want[:3]], [h["id"] for h in got[:3]]))
    return {"queries": len(queries), "top1": top1, "top3": top3, "whole": whole, "diffs": diffs, "hits": js}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    kb = load_kb(os.path.join(REPO, "kb"), use_cache=False)
    assert not kb.problems
    return kb, search_index.build_index(kb), export(kb, tmp_path_factory.mktemp("shipped"))


def labelled_queries() -> list:
    return [q["query"] for path in QUERY_FILES for q in search_evaluate.load_queries(path)]


def out_of_scope_queries() -> list:
    import yaml
    with open(os.path.join(HERE, "real_reports", "out_of_scope.yaml"), encoding="utf-8") as fh:
        return [q["query"] for q in yaml.safe_load(fh)["queries"]]


def test_node_ranks_every_labelled_query_as_python_does(shipped):
    kb, index, folder = shipped
    assert index.header["dense"] is not None, "the shipped KB's index has no entry vectors"
    queries = labelled_queries() + ODD_QUERIES + out_of_scope_queries()
    report = compare(index, folder, queries)
    print(f"\nnode vs python, hybrid: {report['queries']} queries, top-1 {report['top1']}, "
          f"top-3 {report['top3']}, all 10 hits with scores {report['whole']}")
    assert report["diffs"] == []
    # what is said beside the hits is compared too: both kinds occur, so the comparison can fail
    said = [hits[0] for hits in report["hits"] if hits]
    assert sum("tell_apart" in h for h in said) >= 20 and sum("out_of_scope" in h for h in said) >= 20


def test_node_ranks_by_words_only_as_kb_search_lexical(shipped):
    kb, index, folder = shipped
    queries = labelled_queries() + ODD_QUERIES
    report = compare(index, folder, queries, dense=False)
    assert report["diffs"] == []


def test_without_the_token_table_the_site_ranks_by_words_only(shipped, tmp_path):
    """A build that cannot read the token table exports no vectors and no table, and the JS
    then ranks as `kb search` does without its dense side."""
    kb, index, _ = shipped
    folder = export(kb, tmp_path, data_dir=str(tmp_path / "no-embeddings"))
    data = json.load(open(os.path.join(folder, "kb-index.json"), encoding="utf-8"))
    assert data["dense"] is None and data["embed"] is None
    assert sorted(os.listdir(folder)) == sorted(["kb-index.json", site_search.SCRIPT, site_search.STYLE])
    report = compare(index, folder, labelled_queries()[:40], dense=False)
    assert report["diffs"] == []
    hybrid = compare(index, folder, labelled_queries()[:40], dense=True)  # node: no table, so lexical
    assert hybrid["top3"] < hybrid["queries"], "words-only and hybrid rankings never differ: the check proves nothing"


def test_ranking_constants_come_from_the_exported_index(shipped, tmp_path, monkeypatch):
    """Changing kb_tools.search.rank's constants and rebuilding moves the site's ranking with them."""
    kb, index, folder = shipped
    queries = labelled_queries()[::4]  # every query is compared with the shipped constants above
    before = [[h["id"] for h in hits[:3]] for hits in node_rank(folder, queries)]
    for name, value in (("LEXICAL_SHARE", 0.9), ("DENSE_BASELINE_RANK", 3), ("LINE_BONUS", 0.5), ("LOW_CONFIDENCE", 90.0)):
        monkeypatch.setattr(search_rank, name, value)
    patched = export(kb, tmp_path)
    data = json.load(open(os.path.join(patched, "kb-index.json"), encoding="utf-8"))
    assert data["constants"]["LEXICAL_SHARE"] == 0.9 and data["constants"]["DENSE_BASELINE_RANK"] == 3
    report = compare(index, patched, queries)
    assert report["diffs"] == []
    after = [[h["id"] for h in hits[:3]] for hits in report["hits"]]
    assert after != before


def test_index_lacking_a_constant_is_refused(shipped, tmp_path):
    kb, index, folder = shipped
    data = json.load(open(os.path.join(folder, "kb-index.json"), encoding="utf-8"))
    del data["constants"]["LEXICAL_SHARE"]
    broken = tmp_path / "search"
    broken.mkdir()
    (broken / "kb-index.json").write_text(json.dumps(data), encoding="utf-8")
    proc = subprocess.run([NODE, SCRIPT, str(broken)], input="[]", capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "LEXICAL_SHARE" in proc.stderr
