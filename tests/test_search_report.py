"""`kb search` on a whole pasted report, its differential ("tell apart") and its scope note."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kb_tools.core.util import TELL_APART_CHARS, check_line
from kb_tools.lint import lint_text
from kb_tools.search import answer as search_answer
from kb_tools.search import report as reports
from kb_tools.search.answer import answer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REPORT = """Model does not learn, loss stuck

### Describe the bug
- [x] My own modified scripts

Hi, my classifier never learns. Here is my loop:

```python
model = Net().to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    out = model(x)
    loss = criterion(out, y)
    loss.backward()
    optimizer.step()
```

Epoch 1 loss: 2.3026
Epoch 2 loss: 2.3025
Epoch 3 loss: 2.3027

```
Traceback (most recent call last):
  File "train.py", line 40, in <module>
    scheduler.step()
UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the opposite order
```
"""


def kb(*args, stdin=None):
    env = {k: v for k, v in os.environ.items() if k != "KB_PATH"}
    return subprocess.run([sys.executable, "-m", "kb_tools", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, input=stdin, timeout=120)


def test_a_report_is_split_into_prose_code_errors_and_logs():
    parts = reports.split_report(REPORT)
    assert parts.prose[0] == "Model does not learn, loss stuck"
    assert not any("Describe the bug" in p or "[x]" in p for p in parts.prose)  # template lines are dropped
    assert len(parts.code) == 1 and parts.code[0].startswith("model = Net()") and "optimizer.step()" in parts.code[0]
    assert parts.logs == ["Epoch 1 loss: 2.3026", "Epoch 2 loss: 2.3025", "Epoch 3 loss: 2.3027"]
    assert len(parts.errors) == 1 and parts.errors[0].startswith("UserWarning: Detected call of")
    assert not any("File \"train.py\"" in line for line in parts.prose + parts.errors)


@pytest.mark.parametrize("lines, signature, facts", [
    (["loss: 2.3026", "loss: 2.3025", "loss: 2.3026"], "loss-at-chance", {"classes": 10}),
    (["step 1 loss 0.6931", "step 2 loss 0.6930", "step 3 loss 0.6932"], "loss-at-chance", {"classes": 2}),
    (["loss: 1.2", "loss: 3.5", "loss: 48.0", "loss: nan"], "nan-after-spike", {"value": "48"}),
    (["loss: nan", "loss: nan"], "nan-from-start", {}),
    (["train_loss: 0.9 val_loss: 0.8", "train_loss: 0.6 val_loss: 0.7", "train_loss: 0.3 val_loss: 0.95"],
     "val-rises", {}),
    (["loss: 0.0003", "loss: 0.0001", "loss: 0.0001"], "loss-near-zero", {}),
    (["epoch 9 lr: 0.001 loss: 0.5", "epoch 10 lr: 0.0 loss: 0.5", "epoch 11 lr: 0 loss: 0.5"], "lr-zero", {}),
])
def test_log_signatures_read_what_the_numbers_show(lines, signature, facts):
    found = reports.log_signatures(lines)
    assert signature in found, found
    for key, value in facts.items():
        assert found[signature][key] == value


@pytest.mark.parametrize("lines", [
    ["loss: 1.000", "loss: 1.001", "loss: 1.000"],        # flat, but not at any ln(C)
    ["loss: 2.30", "loss: 1.90", "loss: 1.20"],            # starts at chance and learns
    ["loss: 0.5", "loss: 0.4", "loss: nan"],               # NaN without growing first: not "after a spike"
    ["lr: 0.001", "lr: 0.0009"],
])
def test_a_healthy_or_other_log_shows_none_of_those_signatures(lines):
    found = reports.log_signatures(lines)
    assert not set(found) & {"loss-at-chance", "nan-after-spike", "lr-zero", "loss-near-zero"}, found


def test_every_signature_points_at_entries_of_the_kb(shipped_kb):
    for name, (_, entries) in reports.SIGNATURES.items():
        assert entries and not set(entries) - set(shipped_kb.entries), name


def test_an_error_line_matches_its_entrys_message_despite_paths_and_numbers(shipped_index):
    messages = reports.error_messages(shipped_index)
    line = ("/home/me/env/lib/python3.9/site-packages/torch/optim/lr_scheduler.py:134: UserWarning: Detected call "
            "of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them "
            "in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will")
    assert "scheduler-step-order" in reports.message_entries([line], messages)
    assert reports.message_entries(["ValueError: could not convert string to float: 'abc'"], messages) == {}


def test_pasted_code_fragments_are_linted_after_repair():
    fragment = ">>> for x, y in loader:\n...     loss = criterion(model(x), y)\n...     loss.backward()\n" \
               "...     optimizer.step()\n...     print(loss.item(), end="  # the paste ends mid-call
    found = reports.lint_entries([fragment], lint_text)
    assert "optimizer-step-order" in found and found["optimizer-step-order"].startswith("KBL004")
    assert reports.lint_entries([fragment], None) == {}  # no linter given, no code read
    assert reports.lint_entries(["this is ( not python"], lint_text) == {}


def test_report_evidence_lifts_its_entries_and_is_shown(shipped_index):
    result = answer(shipped_index, REPORT, 10, lint_source=lint_text)
    assert result.report is not None
    kinds = {e: {k for k, _ in items} for e, items in result.evidence.items()}
    assert "lint" in kinds["optimizer-step-order"] and "message" in kinds["scheduler-step-order"]
    assert "log" in kinds["overfit-one-batch"]
    ids = [h.id for h in result.hits]
    assert ids.index("optimizer-step-order") < 3 and "scheduler-step-order" in ids[:5]
    as_one_query = [h.id for h in answer(shipped_index, " ".join(REPORT.split()), 10).hits]
    assert "optimizer-step-order" not in as_one_query[:3]  # the words alone do not find what lint does


def test_kb_search_reads_a_report_from_standard_input():
    out = kb("search", "-", stdin=REPORT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("read as a report: ")
    assert "found: kb lint: KBL004" in out.stdout
    data = json.loads(kb("search", "-", "--json", stdin=REPORT).stdout)
    hit = next(h for h in data if h["id"] == "optimizer-step-order")
    assert any(line.startswith("kb lint: KBL004") for line in hit["evidence"])


def test_a_report_over_the_limit_is_one_line_and_exit_2():
    out = kb("search", "-", stdin="loss flat\n" + "x" * (200_000))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "limit is 100000" in out.stderr


def _close_query(index, queries):
    return next(q for q in queries if answer(index, q).tell_apart)


def test_close_leaders_each_get_their_checks_first_sentence(shipped_kb, shipped_index):
    from kb_tools.search.evaluate import load_queries
    query = _close_query(shipped_index, [q["query"] for q in load_queries(os.path.join(ROOT, "tests", "queries.yaml"))])
    result = answer(shipped_index, query)
    top = result.hits[0].score
    group = [h for h in result.hits if h.id in result.tell_apart]
    assert 2 <= len(group) <= search_answer.DIFFERENTIAL_SIZE and group == result.hits[:len(group)]
    assert all(h.score >= search_answer.CLOSE_SHARE * top for h in group)
    assert len(result.hits) == len(group) or result.hits[len(group)].score < search_answer.CLOSE_SHARE * top \
        or len(group) == search_answer.DIFFERENTIAL_SIZE
    for hit in group:
        assert result.tell_apart[hit.id] == check_line(shipped_kb.entries[hit.id].check)
    printed = kb("search", query).stdout
    assert printed.count("tell apart: ") == len(group)
    data = json.loads(kb("search", query, "--json").stdout)
    assert [h["id"] for h in data if "tell_apart" in h] == [h.id for h in group]


def test_a_clear_first_hit_gets_no_differential(shipped_index):
    result = answer(shipped_index, "IndexError: Target 25 is out of bounds.")
    assert result.tell_apart == {} and not result.hits[0].low_confidence


@pytest.mark.parametrize("query", [
    "CUDA out of memory. Tried to allocate 2.00 GiB when training with batch size 64",
    "ModuleNotFoundError: No module named 'torch' after pip install",
    "training is very slow, about 2 it/s on a V100",
    "RuntimeError: Address already in use when launching torchrun",
    "torch.onnx.export fails with UnsupportedOperatorError",
])
def test_out_of_scope_queries_say_what_the_kb_covers(shipped_index, query):
    result = answer(shipped_index, query)
    assert result.scope and result.scope.endswith(search_answer.COVERS)
    assert all(h.low_confidence for h in result.hits) and result.tell_apart == {}
    data = json.loads(kb("search", query, "--json").stdout)
    assert data and all(h["low_confidence"] and h["out_of_scope"] == result.scope for h in data)
    assert kb("search", query).stdout.startswith("out of scope: this reads as ")


def test_an_entry_that_names_the_message_keeps_its_place(shipped_index):
    """fused-foreach-optimizer is about an out-of-memory error: a query with its own words is in scope."""
    result = answer(shipped_index, "CUDA out of memory inside optimizer.step() in _multi_tensor_adam although "
                                   "forward and backward fit")
    assert result.scope is None and result.hits[0].id == "fused-foreach-optimizer"


def test_scope_words_match_whole_words_only():
    words = search_answer.scope_words("CUDA OOM! in the room")
    assert " oom " in words and " room " in words and words.count("oom") == 2
    assert search_answer.out_of_scope("the room is warm", []) is None
    assert search_answer.out_of_scope("CUDA OOM!", []) is not None


def test_a_tell_apart_line_is_at_least_a_useful_sentence_long():
    assert check_line("Three measurements, in order. First the gradient of the term. Then the rest.") == \
        "Three measurements, in order. First the gradient of the term. Then the rest."
    long_first = "Perturb one token: " + "check that every earlier output is unchanged " * 9 + ". More."
    line = check_line(long_first)
    assert line.startswith("Perturb one token: check that") and len(line) >= TELL_APART_CHARS
    assert check_line("Print the lr where the loss flattens; a value far below the start is this entry.") == \
        "Print the lr where the loss flattens; a value far below the start is this entry."


def test_kb_context_reads_a_report_and_names_the_close_leaders_checks():
    out = kb("context", "-", "--json", stdin=open(os.path.join(ROOT, "examples", "issue_flat_loss.md")).read())
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    found = {e["id"]: e for e in data["entries"]}
    assert any(line.startswith("kb lint: KBL004") for line in found["optimizer-step-order"]["evidence"])
    close = [e for e in data["entries"] if "tell_apart" in e]
    assert len(close) >= 2 and "one check tells them apart:\n" in data["markdown"]
    for e in close:
        assert f"- {e['id']}: {e['tell_apart']}" in data["markdown"]


def test_a_line_longer_than_any_line_of_code_is_never_matched_as_code():
    """The code-line pattern backtracks quadratically on a 100 kB "for a in a in ..." line (1.6 s):
    lines over MAX_CODE_LINE are not offered to it, so they stay prose."""
    short = "for x, y in loader:"
    huge = "for " + "a in " * 20_000 + ":"
    assert reports.split_report(short + "\n    loss.backward()").code == ["for x, y in loader:\n    loss.backward()"]
    parts = reports.split_report(huge + "\nloss flat")
    assert parts.code == [] and parts.prose == [huge, "loss flat"]


def test_python_warnings_about_pasted_code_stay_off_the_users_terminal():
    report = 'loss flat\n```\nx = 1if y else 2\npath = "C:\\data"\nloss.backward()\n```\n'
    out = kb("search", "-", "-n", "1", stdin=report)
    assert out.returncode == 0 and out.stderr == "", out.stderr


def test_an_area_filter_holds_for_what_a_report_shows_too(shipped_index, shipped_kb):
    area = shipped_kb.entries["scheduler-step-order"].area
    other = next(a for a in ("loss", "data", "wiring") if a != area)
    from kb_tools.search.rank import allowed_entries
    result = answer(shipped_index, REPORT, 10, area=other, lint_source=lint_text)
    kept = {shipped_index.header["ids"][i] for i in allowed_entries(shipped_index, other)}
    assert result.hits and {h.id for h in result.hits} <= kept and set(result.evidence) <= kept
