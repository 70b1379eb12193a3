"""Read a whole pasted report (prose, code, tracebacks, log lines) into evidence for `kb search`.

People paste the issue they would file: a few sentences, their training loop, the traceback and
the last lines of the log. Ranked as one bag of words, the code's identifiers and the log's
numbers drown the few words that name the failure. So a report is split into its parts, and each
part is read by what understands it:

- prose (and the error lines) goes to the text ranking, as a query;
- code blocks go through `kb lint` (the caller passes its `lint_source`: search and lint are separate
  extension points, so this module never imports it): a finding names its entry outright;
- error and warning lines are matched against the KB's own error-message symptoms;
- numeric log lines go through a small signature reader (`log_signatures`): a loss flat at the
  chance value of its classes, a NaN after a spike, validation rising while training falls, a loss
  near zero from the first steps, a learning rate printed as zero.

`rank_report` fuses that evidence with the text ranking by adding fixed bonuses (below), checked on
the whole reports of the dev split and of the training reports: halving, doubling or dropping them
moves one or two of 96 reports (BENCHMARKS.md "Whole reports"). No torch, no numpy: this is on
`kb search`'s path (for a report; a one-line query never loads it).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# Fusion: bonuses in the ranking's confidence units (0-100, LOW_CONFIDENCE is 35)
LINT_BONUS = 40.0          # `kb lint` found the entry's mistake in the pasted code
MESSAGE_BONUS = 30.0       # an error line holds one of the entry's error-message symptoms
SIGNATURE_BONUS = 12.0     # the log shows a signature tied to the entry
MESSAGE_COVERAGE = 0.8     # share of a symptom's message words an error line must hold
CANDIDATES = 30            # text hits the evidence re-orders (an entry with evidence joins them)
MAX_CODE_LINE = 400        # characters: a longer unindented line is never read as a line of code

# Log signatures and the entries each points to (every id is checked against the KB by a test).
SIGNATURES = {
    "loss-at-chance": ("the loss stays at the chance value ln(C) of {classes} classes ({value})",
                       ("overfit-one-batch", "params-not-in-optimizer", "loss-detached-from-graph", "double-softmax",
                        "label-misalignment", "lr-too-low", "dead-relu", "constant-init-symmetry",
                        "init-loss-check", "metric-stuck")),
    "nan-after-spike": ("the loss grows to {value} and then turns NaN or inf",
                        ("lr-too-high", "exploding-gradients", "fp16-overflow", "nan-loss", "missing-warmup",
                         "attention-logit-growth", "gradscaler-scale-collapse")),
    "nan-from-start": ("the loss is NaN or inf from its first logged value",
                       ("nan-loss", "nan-grad-at-zero", "std-of-one-sample", "fp16-overflow")),
    "val-rises": ("validation loss rises ({value}) while training loss falls",
                  ("overfitting-val-loss-rises", "data-leakage", "over-regularization")),
    "loss-near-zero": ("the loss is near zero ({value}) from the first logged steps",
                       ("autoregressive-off-by-one", "data-leakage", "labels-all-masked", "causal-mask-missing",
                        "ignore-index-mismatch", "label-misalignment")),
    "lr-zero": ("the learning rate is printed as zero ({value})",
                ("lr-decay-too-early", "missing-warmup", "log-actual-lr", "scheduler-step-order",
                 "lr-not-restored-after-load")),
}

_FENCE = re.compile(r"^\s*(```|~~~)")
_ERROR_LINE = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Warning)\b\s*:|^\s*(?:error|warning)\s*:|Traceback \(most recent")
_TRACE_FRAME = re.compile(r'^\s*File "[^"]*", line \d+|^\s*\^+\s*$')
_CODE_LINE = re.compile(
    r"^\s*(?:import \w|from [\w.]+ import |def \w+\(|class \w+[(:]|for .+ in .+:\s*$|while .+:\s*$|if .+:\s*$"
    r"|else:\s*$|return\b|with .+:\s*$|@\w"
    r"|[\w.\[\]]+\s*(?:[+\-*/]?=)\s*\S.*[(\[]"           # x = f(...), self.a = nn.Linear(...)
    r"|[\w.\[\]]+\.\w+\(.*\)\s*(?:#.*)?$)")               # loss.backward(), optimizer.step()
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|inf|-inf)"
_METRIC = re.compile(r"(?<![\w.])((?:val(?:id(?:ation)?)?[_ ]?|test[_ ]?|train(?:ing)?[_ ]?)?loss|lr|learning[_ ]rate)"
                     r"\s*(?:\([^)]*\))?\s*[:=]?\s*" + _NUMBER + r"(?![\w.])", re.I)


@dataclass
class Report:
    """A pasted report, split into what each reader reads."""

    prose: list = field(default_factory=list)    # lines of text
    code: list = field(default_factory=list)     # blocks of code (str each)
    errors: list = field(default_factory=list)   # error and warning lines
    logs: list = field(default_factory=list)     # lines with a loss or lr printed as a number

    def text(self) -> str:
        """What the text ranking reads: the prose and the error lines, in the report's words."""
        return "\n".join(self.prose + self.errors)


# issue-template lines: a Markdown heading, a checkbox, a comment, a bold label alone, a greeting
_BOILERPLATE = re.compile(r"^\s*(?:#{1,6}\s|[-*]\s*\[[ xX]\]|<!--|\*\*[^*]{0,60}\*\*:?\s*$"
                          r"|(?:hi|hello|thanks?(?: you)?)\b[\s,!.]*\w{0,12}[\s,!.]*$)", re.I)


def _block_kind(lines: list) -> str:
    """'code', 'error' or 'log' for a fenced or indented block."""
    body = [ln for ln in lines if ln.strip()]
    if not body:
        return "prose"
    if any(_ERROR_LINE.search(ln) or _TRACE_FRAME.search(ln) for ln in body):
        return "error"
    if sum(bool(_METRIC.search(ln)) for ln in body) * 2 >= len(body):
        return "log"
    return "code"


def _read_block(report: "Report", block: list) -> None:
    """File a fenced or indented block under code, error lines or log lines."""
    kind = _block_kind(block)
    if kind == "log":
        report.logs += [ln.strip() for ln in block if _METRIC.search(ln)]
    elif kind == "code":
        report.code.append(_dedent("\n".join(block)))
    elif kind == "error":
        # a script pasted above its traceback: the lines before the traceback are code
        start = next((n for n, ln in enumerate(block) if "Traceback (most recent" in ln or _TRACE_FRAME.search(ln)
                      or _ERROR_LINE.search(ln)), 0)
        if start and _block_kind(block[:start]) == "code":
            report.code.append(_dedent("\n".join(block[:start])))
        report.errors += [ln.strip() for ln in block[start:] if _ERROR_LINE.search(ln)
                          and "Traceback (most recent" not in ln]
        report.logs += [ln.strip() for ln in block[start:] if _METRIC.search(ln) and not _ERROR_LINE.search(ln)]


def split_report(text: str) -> Report:
    """Prose, code blocks, error lines and log lines of a pasted report, in order of appearance;
    issue-template headings, checkboxes and greetings are dropped."""
    report = Report()
    block, fenced = [], False

    def close_block():
        if block:
            _read_block(report, block)
            block.clear()

    for line in text.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            if fenced:
                close_block()
            fenced = not fenced
            continue
        if fenced:
            block.append(line)
            continue
        stripped = line.strip()
        # a code line is short: the cap also keeps the pattern's backtracking off a pasted 100 kB line
        looks_like_code = stripped and len(line) <= MAX_CODE_LINE and _CODE_LINE.search(line)
        if line.startswith(("    ", "\t")) or looks_like_code or (block and not stripped):
            block.append(line)
            continue
        close_block()
        if not stripped or _BOILERPLATE.match(stripped) or _TRACE_FRAME.match(stripped):
            continue
        if _ERROR_LINE.search(stripped):
            report.errors.append(stripped)
        elif _METRIC.search(stripped) and _metric_share(stripped) >= 0.3:
            report.logs.append(stripped)
        else:
            report.prose.append(stripped)
    close_block()
    return report


def _metric_share(line: str) -> float:
    """How much of a line is numbers: a log line is mostly numbers, a sentence that names one is not."""
    tokens = line.split()
    return sum(bool(re.search(r"\d|^\W*(?:nan|-?inf)\W*$", t, re.I)) for t in tokens) / max(len(tokens), 1)


def _dedent(code: str) -> str:
    import textwrap
    return textwrap.dedent(code).strip("\n")


# ---------------------------------------------------------------- readers

def lint_entries(code_blocks: list, lint_source) -> dict:
    """{entry id: the first finding's message} for what `kb lint` finds in the pasted code.

    A block that does not parse alone (a fragment of a loop) is tried once more with its lines
    joined to the other blocks; fragments that still do not parse are skipped, never guessed at."""
    if not code_blocks or lint_source is None:
        return {}
    import warnings
    found = {}
    attempts = list(code_blocks) + (["\n".join(code_blocks)] if len(code_blocks) > 1 else [])
    with warnings.catch_warnings():  # "invalid escape sequence" and the like: about the paste, not for the user
        warnings.simplefilter("ignore", SyntaxWarning)
        for code in attempts:
            code = _parsable(code)
            if code is None:
                continue
            for f in lint_source(code, "<report>"):
                if f.entry:
                    found.setdefault(f.entry, f"{f.code} {f.message}")
    return found


PARSE_REPAIRS = 12  # lines a pasted fragment may lose before it is given up


def _parsable(code: str):
    """`code`, or the largest part of it Python can parse: a pasted fragment often has a console
    prompt, an elided line (`...`) or a statement cut at the end of the paste. The line a
    SyntaxError names is dropped (the last line when the error is past the end), PARSE_REPAIRS times
    at most; None when it still does not parse."""
    lines = [re.sub(r"^(?:>>>|\.\.\.) ?", "", ln) for ln in code.split("\n")]
    for _ in range(PARSE_REPAIRS + 1):
        text = _dedent("\n".join(lines))
        if not text.strip():
            return None
        try:
            compile(text, "<report>", "exec", dont_inherit=True, flags=0x400)  # PyCF_ONLY_AST: parse, run nothing
            return text
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            at = getattr(exc, "lineno", None) or len(lines)
            lines = text.split("\n")
            del lines[min(max(at, 1), len(lines)) - 1]
    return None


def _message_words(text: str) -> list:
    return re.findall(r"[a-z_]{3,}", text.lower())


def message_entries(errors: list, kb_messages: dict) -> dict:
    """{entry id: its matched message} for error lines that hold an entry's error-message symptom:
    at least MESSAGE_COVERAGE of the words of that message's first sentence, so paths, shapes and
    numbers may differ."""
    if not errors:
        return {}
    from kb_tools.core.util import first_sentence
    found = {}
    words = set(_message_words(" ".join(errors)))
    for entry, messages in kb_messages.items():
        for message in messages:
            # its first sentence: users paste a long warning's opening and cut the rest
            want = set(_message_words(first_sentence(message))) or set(_message_words(message))
            if len(want) >= 3 and len(want & words) >= MESSAGE_COVERAGE * len(want):
                found.setdefault(entry, message)
                break
    return found


def _series(log_lines: list) -> dict:
    """{'train': [...], 'val': [...], 'lr': [...]} of the numbers the log lines print."""
    out = {"train": [], "val": [], "lr": []}
    for line in log_lines:
        for name, number in _METRIC.findall(line):
            name = name.lower()
            key = "lr" if name.startswith(("lr", "learning")) else "val" if name.startswith(("val", "test")) else "train"
            try:
                out[key].append(float(number))
            except ValueError:
                continue
    return out


def log_signatures(log_lines: list) -> dict:
    """{signature: what was read} for the SIGNATURES a log shows; see each rule below."""
    s = _series(log_lines)
    found: dict[str, dict] = {}
    train, val, lr = s["train"], s["val"], s["lr"]
    finite = [x for x in train if math.isfinite(x)]
    if train and not math.isfinite(train[0]):
        found["nan-from-start"] = {}
    elif len(finite) >= 2 and any(not math.isfinite(x) for x in train):
        first_bad = next(n for n, x in enumerate(train) if not math.isfinite(x))
        before = [x for x in train[:first_bad] if math.isfinite(x)]
        if before and max(before) > 1.5 * before[0]:  # it grew before it broke
            found["nan-after-spike"] = {"value": f"{max(before):g}"}
    if len(finite) >= 3:
        lo, hi = min(finite), max(finite)
        mean = sum(finite) / len(finite)
        if mean > 0.1 and (hi - lo) <= 0.03 * mean:  # flat
            classes = round(math.exp(mean))
            if 2 <= classes <= 100_000 and abs(math.log(classes) - mean) <= 0.02 * mean:
                found["loss-at-chance"] = {"classes": classes, "value": f"{mean:.4g}"}
        if max(finite[:3]) < 0.01:
            found["loss-near-zero"] = {"value": f"{finite[0]:g}"}
    if len(val) >= 3 and len(finite) >= 3:
        if val[-1] > min(val) * 1.1 and val.index(min(val)) < len(val) - 1 and finite[-1] < finite[0]:
            found["val-rises"] = {"value": f"{min(val):g} -> {val[-1]:g}"}
    if lr and all(x == 0 for x in lr[-2:]):
        found["lr-zero"] = {"value": f"{lr[-1]:g}"}
    return found


def signature_line(name: str, facts: dict) -> str:
    """One line on what the log showed, in words."""
    template = SIGNATURES[name][0]
    return template.format(**{"classes": "?", "value": "?", **facts})


# ---------------------------------------------------------------- fusion

@dataclass
class Evidence:
    """What the non-text readers found, per entry: [(kind, line)]."""

    by_entry: dict = field(default_factory=dict)

    def add(self, entry: str, kind: str, line: str) -> None:
        self.by_entry.setdefault(entry, []).append((kind, line))


BONUS = {"lint": LINT_BONUS, "message": MESSAGE_BONUS, "log": SIGNATURE_BONUS}


def read_evidence(report: Report, kb_messages: dict, known: set, lint_source=None) -> Evidence:
    """Evidence from the code (`lint_source`, kb_tools.lint.engine's; none without it), error lines
    (messages) and logs (signatures) of a report."""
    evidence = Evidence()
    for entry, line in lint_entries(report.code, lint_source).items():
        if entry in known:
            evidence.add(entry, "lint", f"kb lint: {line}")
    for entry, message in message_entries(report.errors, kb_messages).items():
        if entry in known:
            evidence.add(entry, "message", f"error message: {message}")
    for name, facts in log_signatures(report.logs).items():
        for entry in SIGNATURES[name][1]:
            if entry in known:
                evidence.add(entry, "log", f"log: {signature_line(name, facts)}")
    return evidence


def fuse(hits: list, evidence: Evidence, make_hit) -> list:
    """The text hits re-scored with the evidence's bonuses; an entry with evidence but no text hit
    joins with its bonus alone (`make_hit(entry_id, score, matched)` builds it)."""
    by_id = {h.id: h for h in hits}
    for entry, items in evidence.by_entry.items():
        bonus = sum(BONUS[k] for k in {k for k, _ in items})
        hit = by_id.get(entry)
        if hit is None:
            by_id[entry] = make_hit(entry, bonus, items[0][1])
        else:
            hit.score += bonus
    return sorted(by_id.values(), key=lambda h: -h.score)


def error_messages(index) -> dict:
    """{entry id: its symptom lines that are error or warning messages}, read from the search index."""
    head, out = index.header, {}
    for idx, entry in enumerate(head["ids"]):
        symptoms = index.get(("e", idx))[1]
        messages = [s for s in symptoms if _ERROR_LINE.search(s)]
        if messages:
            out[entry] = messages
    return out


def rank_report(index, text: str, limit: int = 10, allowed: set | None = None, dense: bool = True,
                lint_source=None) -> tuple:
    """(hits, evidence, report) for a pasted report: the text ranking of its prose and error lines,
    re-ordered by what its code (read by `lint_source`), error lines and logs show."""
    from kb_tools.search.rank import LOW_CONFIDENCE, MAX_QUERY_CHARS, MAX_REPORT_CHARS, Hit, QueryError, rank
    if len(text) > MAX_REPORT_CHARS:
        raise QueryError(f"report is {len(text)} characters; the limit is {MAX_REPORT_CHARS}")
    report = split_report(text)
    words = report.text().strip() or text
    head = index.header
    ids = head["ids"]
    position = {e: n for n, e in enumerate(ids)}
    known = {e for e in ids if allowed is None or position[e] in allowed}
    hits = rank(index, words[:MAX_QUERY_CHARS], CANDIDATES, allowed=allowed, dense=dense)
    evidence = read_evidence(report, error_messages(index), known, lint_source)

    def make_hit(entry, score, matched):
        idx = position[entry]
        return Hit(entry, index.get(("e", idx))[0], head["areas"][idx], score, matched)

    fused = fuse(hits, evidence, make_hit)[:limit]
    for hit in fused:
        hit.low_confidence = hit.score < LOW_CONFIDENCE
    return fused, evidence, report
