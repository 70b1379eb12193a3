"""What `kb search` says beside its ranking: a differential when the leading entries are too close
to call, and a scope note when the query is about something this KB does not cover.

A differential: when the second (and third) hit score within CLOSE_SHARE of the first, the words
cannot decide between them, and reading three entries is slower than running one check. Each
entry's check already names what tells it from its look-alikes; its opening sentence (two when the
first is short: core.util.check_line) is the "tell apart" line, kept in the search index, so no KB
load on this path. On the real-report dev split, 51 of 148 queries get a group at 0.85; the first
hit is right for 33 of them and the group holds the answer for 40 (BENCHMARKS.md "Whole reports,
tell apart and out of scope").

A scope note: out-of-memory errors, installation, slow steps, distributed set-up, export and plain
API questions are not "training runs but does not learn". A query that reads as one of those
(SCOPE_TOPICS) and whose best hit explains it poorly (under SCOPE_CONFIDENCE) gets one line on
what the KB covers, and every hit is marked a guess. An entry that names the message exactly
(`CUDA out of memory inside optimizer.step()` -> fused-foreach-optimizer) scores above it and
keeps its place. The phrases and the threshold were set on the dev half of
tests/real_reports/out_of_scope.yaml and the in-scope dev split; the test half measures them.

The docs site's script reads CLOSE_SHARE, SCOPE_CONFIDENCE and SCOPE_TOPICS from the exported
index, so it answers the same way.
"""
from __future__ import annotations

CLOSE_SHARE = 0.85        # a hit scoring at least this share of the first one's is "close"
DIFFERENTIAL_SIZE = 3     # at most this many entries are told apart
SCOPE_CONFIDENCE = 40.0   # a best hit scoring under this does not explain an out-of-scope-looking query
COVERS = ("this KB covers training that runs but does not learn: a flat or NaN loss, accuracy at chance, "
          "a validation gap, and the wiring of losses, optimizers, data and fine-tuning behind them")

# topic -> (what it is, in words; phrases that name it). A phrase matches whole words of the query,
# lower-cased, with every character other than a letter, digit or underscore read as a space
# (`scope_words`), so "OOM" matches "CUDA OOM!" but not "room". Plain substrings, not regular
# expressions: a plain search imports no `re`, and the site's script matches them the same way.
SCOPE_TOPICS = {
    "memory": ("running out of GPU memory",
               ("out of memory", "oom", "outofmemoryerror", "less memory", "memory usage", "memory footprint")),
    "install": ("installing PyTorch or CUDA",
                ("no module named", "modulenotfounderror", "not compiled with cuda", "cuda version", "cuda driver",
                 "nvidia driver", "no kernel image", "is_available", "pip install", "conda install",
                 "installed torch", "installed pytorch", "install pytorch", "install torch", "installing pytorch")),
    "speed": ("slow steps or data loading",
              ("gpu util", "gpu utility", "gpu utilization", "gpu utilisation", "gpu usage is low", "low gpu",
               "throughput", "time consuming", "training speed", "speed up", "slows down", "slow down",
               "training is slow", "training is very slow", "training is too slow", "training is so slow",
               "training very slow", "training too slow", "training slow", "train slow", "loading is slow",
               "loading is very slow", "dataloader is slow", "dataloader is very slow", "data loading slow")),
    "setup": ("setting up distributed processes",
              ("address already in use", "connection refused", "network is unreachable", "hangs at init",
               "hang at init", "hang at init_process_group", "hangs at init_process_group",
               "hangs at torch distributed init_process_group", "init_process_group hangs",
               "init_process_group hanging", "nccl error", "nccl version", "multi node", "multi nodes",
               "multinode")),
    "export": ("exporting or serving a model",
               ("onnx", "torchscript", "tensorrt", "trt", "libtorch", "jit trace", "jit script")),
    "api": ("a question about the API",
            ("extract features", "extracting features", "extract intermediate features", "feature extraction",
             "number of parameters", "count parameters", "count the parameters", "calculate parameters")),
}


def scope_words(text: str) -> str:
    """` words of the text `: lower-case, every character but a letter, digit or _ a space, padded."""
    return " " + " ".join("".join(ch if ch.isalnum() or ch == "_" else " " for ch in text.lower()).split()) + " "


def out_of_scope(query: str, hits: list) -> str | None:
    """The scope note for `query` ("... which the KB does not cover; ..."), or None when the query
    reads as in scope or its best hit explains it well."""
    if hits and hits[0].score >= SCOPE_CONFIDENCE:
        return None
    words = scope_words(query)
    for name, phrases in SCOPE_TOPICS.values():
        if any(f" {phrase} " in words for phrase in phrases):
            return f"this reads as {name}, which the KB does not cover; {COVERS}"
    return None


def differential(index, hits: list) -> list:
    """[(hit, tell-apart line)] for the leading hits too close to call, [] when the first stands alone."""
    if len(hits) < 2 or hits[0].score <= 0:
        return []
    group = [h for h in hits[:DIFFERENTIAL_SIZE] if h.score >= CLOSE_SHARE * hits[0].score]
    if len(group) < 2:
        return []
    position = {e: n for n, e in enumerate(index.header["ids"])}
    return [(h, index.get(("e", position[h.id]))[4]) for h in group]


class Answer:
    """A ranking and what is said beside it: the tell-apart group, the scope note, and for a pasted
    report what its code, error lines and logs showed (`evidence`: entry -> [(kind, line)])."""

    def __init__(self, hits, tell_apart=(), scope=None, evidence=None, report=None):
        self.hits, self.scope, self.report = hits, scope, report
        self.tell_apart = dict((h.id, line) for h, line in tell_apart)
        self.evidence = evidence.by_entry if evidence is not None else {}

    def said(self, entry_id: str) -> dict:
        """What is said beside one hit, for JSON: tell_apart and evidence, each only when there is one."""
        out = {}
        if entry_id in self.tell_apart:
            out["tell_apart"] = self.tell_apart[entry_id]
        if self.evidence.get(entry_id):
            out["evidence"] = [line for _, line in self.evidence[entry_id]]
        return out

    def to_json(self) -> list:
        """`kb search --json`: the hits array, each hit with what was said about it."""
        scope = {"out_of_scope": self.scope} if self.scope else {}
        return [{**hit.to_json(), **self.said(hit.id), **scope} for hit in self.hits]


def answer(index, text: str, limit: int = 10, area: str | None = None, tag: str | None = None,
           dense: bool = True, lint_source=None) -> Answer:
    """`kb search`'s answer to a query or a pasted report (more than one line): the ranked hits,
    the differential when the first ones are close, the scope note when the KB does not cover it.
    `lint_source` (kb_tools.lint.engine's) reads a report's code; callers above both packages pass it."""
    from kb_tools.search.rank import allowed_entries, rank, validate_query
    allowed = allowed_entries(index, area, tag)
    evidence = report = None
    if "\n" in text.strip():  # a pasted report; a one-line query never imports the reader (nor `re`)
        from kb_tools.search import report as reports
        hits, evidence, report = reports.rank_report(index, text, limit, allowed=allowed, dense=dense,
                                                     lint_source=lint_source)
        words = report.text() or text
    else:
        words = validate_query(text)
        hits = rank(index, words, limit, allowed=allowed, dense=dense)
    note = out_of_scope(words, hits)
    if note:
        for hit in hits:
            hit.low_confidence = True
    return Answer(hits, [] if note else differential(index, hits), note, evidence, report)
