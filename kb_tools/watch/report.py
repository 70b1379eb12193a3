"""Findings and the report of a watched run: the JSON object, its text form, and the merge of ranks.

Plain data only (no torch), so that the parent of a re-executed or torchrun run can merge and
print the ranks' reports without importing torch.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from kb_tools.core.util import KBError, plural, write_atomic

REPORT_VERSION = 1


@dataclass
class Finding:
    """One cause named by a check, with what this run measured."""

    code: str
    entry: str
    title: str
    confidence: float
    message: str
    evidence: dict = field(default_factory=dict)
    where: str | None = None  # file:line where the optimizer, loss, loader or model was created
    step: int | None = None   # the optimizer step at which the criterion was first met
    rank: int | None = None

    def to_dict(self) -> dict:
        return {"code": self.code, "entry": self.entry, "title": self.title,
                "confidence": round(float(self.confidence), 3), "message": self.message,
                "evidence": jsonable(self.evidence), "where": self.where, "step": self.step, "rank": self.rank}


def jsonable(value):
    """`value` as strict JSON data: a NaN or infinite float (a measured loss can be one) becomes
    the string "nan", "inf" or "-inf"; tuples become lists; anything else unknown, its str()."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)


def sort_findings(findings: list) -> list:
    """Most confident first; ties by code, then rank, so the order is stable."""
    return sorted(findings, key=lambda f: (-f["confidence"], f["code"], f["rank"] if f["rank"] is not None else -1))


def merge_reports(reports: list, exit_status: int | None = None, command: list | None = None) -> dict:
    """One report from the ranks' reports: every finding (each keeps its rank), the facts of the
    lowest rank, the most steps any rank watched, and the launcher's exit status."""
    if not reports:
        raise ValueError("no report to merge")
    reports = sorted(reports, key=lambda r: r["run"].get("rank") if r["run"].get("rank") is not None else -1)
    run = dict(reports[0]["run"])
    run["ranks"] = [r["run"].get("rank") for r in reports]
    for key in ("steps", "sampled_steps", "backward_calls", "batches"):
        run[key] = max(r["run"].get(key, 0) for r in reports)
    run["internal_errors"] = [e for r in reports for e in r["run"].get("internal_errors", [])]
    errors = [r["run"]["error"] for r in reports if r["run"].get("error")]
    run["error"] = errors[0] if errors else None
    if exit_status is not None:
        run["exit_status"] = exit_status
    if command is not None:
        run["command"] = command
    from kb_tools.watch.ranks import cross_rank_findings
    findings = sort_findings([f for r in reports for f in r["findings"]] + cross_rank_findings(reports))
    return {"version": REPORT_VERSION, "findings": findings, "run": run, "checks": reports[0].get("checks", [])}


def _use_colour(stream) -> bool:
    return hasattr(stream, "isatty") and stream.isatty() and not os.environ.get("NO_COLOR") \
        and os.environ.get("TERM") != "dumb"


def format_text(report: dict, stream=None) -> str:
    """The findings, most confident first, each with the `kb show` line that explains it, then one
    summary line. Identical findings of several ranks are printed once, with their ranks."""
    stream = stream or sys.stdout
    bold = (lambda s: f"\033[1;31m{s}\033[0m") if _use_colour(stream) else (lambda s: s)
    lines, seen = [], {}
    for f in report["findings"]:
        key = (f["code"], f["message"])
        if key in seen:
            if f["rank"] is not None:
                seen[key].append(f["rank"])
            continue
        seen[key] = [f["rank"]] if f["rank"] is not None else []
        lines.append((key, f))
    out = []
    for key, f in lines:
        ranks = seen[key]
        tag = f" [rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}]" if ranks else ""
        out.append(f"{bold(f['code'])} {f['entry']}: {f['message']}{tag}")
        out.append(f"  kb show {f['entry']}")
    out.append(summary_line(report, len(lines)))
    return "\n".join(out)


def summary_line(report: dict, shown: int | None = None) -> str:
    """`kb watch: N findings in S steps ...`: what was found, how the run ended, what was watched."""
    run = report["run"]
    n = len(report["findings"]) if shown is None else shown
    found = plural(n, "finding") if n else "nothing found"
    steps = run.get("steps", 0)
    how = []
    if run.get("stopped_after_steps"):
        how.append(f"stopped after --steps {run['stopped_after_steps']}" + _evaluation_pass_words(run))
    elif run.get("exit_status"):
        how.append(f"{run.get('script') or 'the script'} exited with status {run['exit_status']}"
                   + (f" ({run['error']})" if run.get("error") else ""))
    watched = []
    for key, word in (("models", "model"), ("optimizers", "optimizer"), ("losses", "loss")):
        count = len(run.get(key, []))
        watched.append(plural(count, word, "losses" if word == "loss" else None))
    ranks = run.get("ranks") or []
    if len(ranks) > 1:
        watched.append(f"{len(ranks)} ranks")
    text = f"kb watch: {found} in {plural(steps, 'optimizer step')}"
    if how:
        text += f" ({'; '.join(how)})"
    text += f"; watched {', '.join(watched)}"
    if not steps:
        text += "; no optimizer step ran, so the checks that compare steps had nothing to compare"
    if run.get("internal_errors"):
        text += f"; {plural(len(run['internal_errors']), 'check')} stopped on an internal error (see --json)"
    return text


def _evaluation_pass_words(run: dict) -> str:
    state = run.get("evaluation_pass")
    if not state:
        if run.get("evaluation_pass_skipped"):
            return (f"; {run['evaluation_pass_skipped']}, so the script's own evaluation was not watched: "
                    "watch the whole run to check it")
        return ""
    if not state.get("batches") and not state.get("model_calls"):
        return (f"; no evaluation ran before {state.get('ended_by') or 'the stop'}"
                + _fast_forward_words(state.get("fast_forward")))
    text = (f" and an evaluation pass of {plural(state.get('batches', 0), 'batch', 'batches')} and "
            f"{plural(state.get('model_calls', 0), 'model call')}, ended by {state.get('ended_by') or 'the stop'}")
    if state.get("resumed_steps"):
        text += f", then {plural(state['resumed_steps'], 'training step')} after it"
    return text + _fast_forward_words(state.get("fast_forward"))


def _fast_forward_words(brief: dict | None) -> str:
    if not brief:
        return ""
    ended = brief.get("ended_by") or "the script's end"
    return (f", then the rest of the script in brief ({plural(brief.get('steps', 0), 'step')} and "
            f"{plural(brief.get('model_calls', 0), 'model call')}, one batch per training epoch; ended by {ended})")


def to_json_text(report: dict) -> str:
    return json.dumps(report, indent=2, allow_nan=False, default=str) + "\n"


def write_report(path: str, report: dict) -> None:
    """Write the report's JSON to `path` atomically: a reader sees the old file or the new one."""
    write_atomic(path, to_json_text(report))


def exit_code(report: dict) -> int:
    """1 when something was found or the run failed (its own non-zero exit), else 0."""
    run = report["run"]
    failed = bool(run.get("exit_status")) and not run.get("stopped_after_steps")
    return 1 if report["findings"] or failed else 0


MAX_REPORT_BYTES = 16 << 20  # a report holds one line per finding and the run's facts: kilobytes


def read_report(path: str) -> dict:
    """A report that `kb watch --report FILE` or `--json` wrote (`-`: standard input), checked
    enough for `kb search --from-watch` and `kb context --from-watch` to read its findings; a
    file that is not one is a one-line KBError naming the file and what is wrong."""
    name = "standard input" if path == "-" else path
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_REPORT_BYTES + 1)
        else:
            if os.path.isdir(path):
                raise KBError(f"{name}: is a folder; give the report file that kb watch --report wrote")
            with open(path, "rb") as fh:
                data = fh.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise KBError(f"{name}: cannot read the watch report: {exc.strerror or exc}") from None
    if len(data) > MAX_REPORT_BYTES:
        raise KBError(f"{name}: larger than {MAX_REPORT_BYTES >> 20} MB; not a kb watch report")
    try:
        report = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise KBError(f"{name}: not a kb watch report (not JSON: {exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("findings"), list):
        raise KBError(f"{name}: not a kb watch report (no 'findings' list); write one with kb watch --report FILE")
    if report.get("version") != REPORT_VERSION:
        raise KBError(f"{name}: a watch report of version {report.get('version')!r}; this kb reads version "
                      f"{REPORT_VERSION} (run kb watch again)")
    for n, finding in enumerate(report["findings"]):
        if not isinstance(finding, dict) or not all(isinstance(finding.get(k), str) for k in ("code", "entry", "message")):
            raise KBError(f"{name}: findings[{n}]: needs the strings 'code', 'entry' and 'message'")
    return report


def finding_line(finding: dict) -> str:
    """A finding as the text report shows it: CODE entry: what was measured (where), [rank]."""
    rank = f" [rank {finding['rank']}]" if finding.get("rank") is not None else ""
    return f"{finding['code']} {finding['entry']}: {finding['message']}{rank}"
