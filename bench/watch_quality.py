"""How well `kb watch` finds the mistakes its entries describe, and how often it cries wolf.

    python bench/watch_quality.py [--only cases|real|bugs] [--json FILE] [--markdown] [--device cuda] [--shard K/N]
                                 [--split dev|test] [--files dev/NAME.py ...]

1. Cases (tests/watch/cases/<entry>/bug_*.py and fixed_*.py, written next to the checks, and the
   healthy look-alikes of tests/watch/lookalikes/<entry>/*.py): per entry and overall, recall =
   bug scripts whose FIRST finding is their entry within 50 optimizer steps; any-finding recall
   (the entry among the findings); findings on the fixed twins and on the look-alikes, which
   should have none. These were written next to the checks: they guard against regressions,
   they do not measure how the checks fare on code nobody tuned them to.
2. Real healthy scripts (tests/watch/real/MANIFEST.yaml, third-party, restored locally, run on
   stand-in data): false alarms per script = findings judged false in the manifest or not judged
   at all. Scripts that are not restored (or differ from the recorded sha256) are skipped and counted.
3. Real silent bugs (tests/watch/bugs/MANIFEST.yaml, rebuilt from public threads), dev and test
   reported separately: the share whose confirmed entry is among the findings, and the share
   where it is the first finding.

A section whose manifest is missing is skipped with a note. Our own scripts (cases, look-alikes,
bugs) run in this process as `kb watch --steps N --json -- python SCRIPT` does, torch on one
thread (the bug scripts in a temporary working folder); third-party scripts run in a child
process each, in a temporary folder, with a timeout.
Progress goes to stderr; the tables to stdout. Only counts and ratios are printed.

--device cuda runs our own scripts with CUDA as torch's default device (they name none), so every
check reads CUDA tensors, each in a process of its own (bench/on_device.py), and leaves the GPU
visible to the third-party scripts, which pick it themselves; --device cpu (the default) hides
any GPU from them. --shard K/N runs every Nth script of each section from the Kth (K from 0), for
parallel runs whose JSON rows are merged afterwards.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import yaml  # noqa: E402

CASES = os.path.join(ROOT, "tests", "watch", "cases")
LOOKALIKES = os.path.join(ROOT, "tests", "watch", "lookalikes")
REAL = os.path.join(ROOT, "tests", "watch", "real")
BUGS = os.path.join(ROOT, "tests", "watch", "bugs")
CASE_STEPS = 50
REAL_STEPS = 20
BUG_STEPS = 50
TIMEOUT = 600


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _failed_report(error: str) -> dict:
    return {"findings": [], "run": {"error": error, "exit_status": None, "steps": 0, "internal_errors": []}}


# ---------------------------------------------------------------- running one script

DEVICE = "cpu"   # set by --device: the default device our own scripts run on
SHARD = (0, 1)   # set by --shard K/N: each section runs its scripts K, K+N, K+2N, ...


def _shard(items: list) -> list:
    k, n = SHARD
    return items[k::n]


@contextlib.contextmanager
def default_device(device: str):
    """Torch's default device set to `device` while one of our scripts runs (see _default_device_mode)."""
    if device == "cpu":
        yield
        return
    with _default_device_mode(device):
        yield


def _default_device_mode(device: str):
    """A TorchFunctionMode that acts as torch.set_default_device(device), except for a random draw
    from an explicit CPU generator (`torch.Generator()` given to randn, randperm, a DataLoader or
    a sampler), which torch refuses on a CUDA tensor: that draw is made on the CPU, then moved or
    copied to the device, as a script that moves its batches there does."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors

    class Mode(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.device = torch.device(device)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            generator = kwargs.get("generator")
            on_cpu = isinstance(generator, torch.Generator) and generator.device.type == "cpu"
            if func in _device_constructors() and kwargs.get("device") is None:
                if on_cpu:
                    return func(*args, **kwargs).to(self.device)
                kwargs["device"] = self.device
            elif on_cpu and args and isinstance(args[0], torch.Tensor) and args[0].device.type != "cpu":
                if getattr(func, "__name__", "").endswith("_"):
                    target = args[0]   # an in-place draw (random_, normal_, ...) into a device tensor
                    drawn = target.detach().cpu()
                    func(drawn, *args[1:], **kwargs)
                    with torch.no_grad():
                        target.copy_(drawn)
                    return target
                # a draw from device tensors (multinomial of a probability vector): on CPU copies
                on_host = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
                return func(*on_host, **kwargs).to(args[0].device)
            return func(*args, **kwargs)
    return Mode()


def watch_in_process(path: str, steps: int, argv: list | tuple = (), cwd: str = ROOT) -> dict:
    """`kb watch --steps STEPS --json -- python PATH ARGV` in this process, torch on one thread and
    DEVICE as its default device: the report (steps 0: no --steps, the whole run is watched and
    reported at its end, as a user runs it)."""
    if DEVICE != "cpu":
        return _watch_on_device(path, steps, argv, cwd)
    import torch

    from kb_tools import cli
    out, err = io.StringIO(), io.StringIO()
    here, threads = os.getcwd(), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            limit = ["--steps", str(steps)] if steps else []
            cli.main(["watch", *limit, "--json", "--", sys.executable, path, *argv])
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken script must not end the bench
        return _failed_report(f"kb watch failed: {type(exc).__name__}: {exc}")
    finally:
        os.chdir(here)
        torch.set_num_threads(threads)
    try:
        return json.loads(out.getvalue())
    except ValueError:
        return _failed_report("no JSON report: " + err.getvalue()[-500:])


def _watch_on_device(path: str, steps: int, argv, cwd: str) -> dict:
    """watch_in_process for --device other than cpu: a child process per script, the script run
    through bench/on_device.py (a device-side assert would end the CUDA context of this process)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "PYTHONPATH": ROOT}
    limit = ["--steps", str(steps)] if steps else []
    command = [sys.executable, "-m", "kb_tools", "watch", *limit, "--json", "--", sys.executable,
               os.path.join(ROOT, "bench", "on_device.py"), DEVICE, os.path.join(ROOT, path), *argv]
    return _child_report(command, cwd, env, TIMEOUT)


def _child_report(command: list, cwd: str, env: dict, timeout: float) -> dict:
    """Run `kb watch ... --json` as a child process: its report, or a failed one saying why."""
    try:
        r = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return _failed_report(f"timed out after {timeout:g} s")
    try:
        return json.loads(r.stdout)
    except ValueError:
        return _failed_report(f"no JSON report (exit {r.returncode}): " + r.stderr[-500:])


def watch_subprocess(path: str, steps: int, argv: list | tuple = (), pythonpath: list | tuple = (),
                     timeout: float = TIMEOUT) -> dict:
    """The same in a child process whose working directory is a fresh temporary folder (the script
    may write files there), with PYTHONPATH = PYTHONPATH entries then the repository root."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([*pythonpath, ROOT])}
    if DEVICE == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""   # a third-party script picks a GPU whenever it sees one
    command = [sys.executable, "-m", "kb_tools", "watch", "--steps", str(steps), "--json", "--",
               sys.executable, os.path.abspath(path), *argv]
    with tempfile.TemporaryDirectory(prefix="kb-watch-bench-") as cwd:
        return _child_report(command, cwd, env, timeout)


def _in_temporary_folder(path: str, steps: int) -> dict:
    """watch_in_process with a fresh temporary working directory, for scripts that may write files."""
    with tempfile.TemporaryDirectory(prefix="kb-watch-bench-") as cwd:
        return watch_in_process(os.path.abspath(path), steps, cwd=cwd)


def _entries(report: dict) -> list:
    return [f["entry"] for f in report.get("findings", [])]


def _codes(report: dict) -> list:
    return [f"{f['code']} {f['entry']}" for f in report.get("findings", [])]


# ---------------------------------------------------------------- 1. cases and look-alikes

def case_section(cases: str = CASES, lookalikes: str = LOOKALIKES, steps: int = CASE_STEPS, run=None) -> dict:
    """Every bug/fixed pair under `cases`, every look-alike under `lookalikes`: rows and per-entry counts."""
    run = run or (lambda path: watch_in_process(os.path.relpath(path, ROOT), steps))
    rows = []
    scripts = sorted(glob.glob(os.path.join(cases, "*", "bug_*.py")) + glob.glob(os.path.join(cases, "*", "fixed_*.py"))
                     + glob.glob(os.path.join(lookalikes, "*", "*.py")))
    scripts = _shard(scripts)
    for i, path in enumerate(scripts, 1):
        entry = os.path.basename(os.path.dirname(path))
        name = os.path.basename(path)
        kind = "bug" if name.startswith("bug_") and path.startswith(cases) else \
            "fixed" if path.startswith(cases) else "lookalike"
        report = run(path)
        findings = report.get("findings", [])
        entries = _entries(report)
        row = {"entry": entry, "script": os.path.relpath(path, ROOT), "kind": kind, "findings": _codes(report),
               "first_step": findings[0]["step"] if findings else None,
               "error": report["run"].get("error") if kind != "bug" else None,
               "internal_errors": len(report["run"].get("internal_errors") or [])}
        if kind == "bug":
            row["first"] = bool(entries) and entries[0] == entry and (findings[0]["step"] or 0) <= steps
            row["any"] = entry in entries
        rows.append(row)
        progress(f"[cases {i}/{len(scripts)}] {row['script']}: {', '.join(row['findings']) or 'no finding'}")
    per_entry: dict[str, dict] = {}
    for row in rows:
        e = per_entry.setdefault(row["entry"], {"bugs": 0, "first": 0, "any": 0, "fixed": 0, "fixed_flagged": 0,
                                                "fixed_findings": 0, "lookalikes": 0, "lookalikes_flagged": 0})
        if row["kind"] == "bug":
            e["bugs"] += 1
            e["first"] += row["first"]
            e["any"] += row["any"]
        else:
            prefix = "fixed" if row["kind"] == "fixed" else "lookalikes"
            e["fixed" if prefix == "fixed" else "lookalikes"] += 1
            e[f"{prefix}_flagged"] += bool(row["findings"])
            if prefix == "fixed":
                e["fixed_findings"] += len(row["findings"])
    total = {k: sum(e[k] for e in per_entry.values()) for k in
             ("bugs", "first", "any", "fixed", "fixed_flagged", "fixed_findings", "lookalikes", "lookalikes_flagged")}
    return {"rows": rows, "per_entry": per_entry, "total": total}


# ---------------------------------------------------------------- 2. real healthy scripts

def _load_manifest(path: str) -> list | None:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or []


def _sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _judged_true(item: dict, finding: str) -> bool:
    code, entry = finding.split(" ", 1)
    return any(j.get("verdict") is True and j.get("code") == code and j.get("entry", entry) == entry
               for j in item.get("judged") or [])


def _judged_false(item: dict, finding: str) -> bool:
    code, entry = finding.split(" ", 1)
    return any(j.get("verdict") is False and j.get("code") == code and j.get("entry", entry) == entry
               for j in item.get("judged") or [])


def _argv(item: dict, root: str) -> list:
    """The item's arguments; one that begins with tests/ is a path from the repository root,
    made absolute because the script runs in a temporary folder."""
    return [os.path.join(root, str(a)) if str(a).startswith("tests/") else str(a) for a in item.get("argv") or []]


def real_section(folder: str = REAL, run=None, timeout: float = TIMEOUT, root: str = ROOT) -> dict | None:
    """Every restored script of folder/MANIFEST.yaml; None when there is no manifest. A script
    counts as restored when it and its `support` files exist, and as changed when one of them
    differs from its recorded sha256."""
    items = _load_manifest(os.path.join(folder, "MANIFEST.yaml"))
    if items is None:
        return None
    items = _shard(items)
    standins = os.path.join(folder, "standins")
    run = run or (lambda path, steps, argv: watch_subprocess(path, steps, argv, [standins], timeout))
    rows, missing, changed = [], [], []
    for i, item in enumerate(items, 1):
        files = [item, *(item.get("support") or [])]
        paths = [os.path.join(folder, f["file"]) for f in files]
        if not all(os.path.isfile(p) for p in paths):
            missing.append(item["file"])
            continue
        if any(f.get("sha256") and _sha256(p) != f["sha256"] for f, p in zip(files, paths)):
            changed.append(item["file"])
            continue
        path = paths[0]
        steps = int(item.get("steps") or REAL_STEPS)
        report = run(path, steps, _argv(item, root))
        found = _codes(report)
        row = {"file": item["file"], "style": item.get("style"), "steps": report["run"].get("steps"),
               "findings": found, "judged_true": sum(_judged_true(item, f) for f in found),
               "judged_false": sum(_judged_false(item, f) for f in found),
               "false_alarms": sum(not _judged_true(item, f) for f in found),
               "error": report["run"].get("error"), "exit_status": report["run"].get("exit_status"),
               "internal_errors": len(report["run"].get("internal_errors") or [])}
        row["unjudged"] = row["false_alarms"] - row["judged_false"]
        rows.append(row)
        progress(f"[real {i}/{len(items)}] {item['file']}: {', '.join(found) or 'no finding'}"
                 f"{' (error: ' + str(row['error'])[:80] + ')' if row['error'] else ''}")
    if missing or changed:
        progress(f"real: {len(missing)} of {len(items)} scripts not restored, {len(changed)} differ from their "
                 f"sha256: skipped (see {os.path.relpath(folder, ROOT)}/README.md)")
    ran = len(rows)
    return {"rows": rows, "listed": len(items), "ran": ran, "missing": missing, "changed": changed,
            "errors": sum(1 for r in rows if r["error"]),
            "findings": sum(len(r["findings"]) for r in rows),
            "false_alarms": sum(r["false_alarms"] for r in rows),
            "unjudged": sum(r["unjudged"] for r in rows),
            "judged_true": sum(r["judged_true"] for r in rows),
            "scripts_with_false_alarm": sum(1 for r in rows if r["false_alarms"]),
            "false_alarms_per_script": sum(r["false_alarms"] for r in rows) / ran if ran else None}


# ---------------------------------------------------------------- 3. real silent bugs

def bug_section(folder: str = BUGS, run=None, steps: int = BUG_STEPS, split: str | None = None,
                files: list | None = None) -> dict | None:
    """Every script of folder/MANIFEST.yaml by split (only `split`'s when given, so work on dev never prints
    a test item's findings; only the manifest `files` when given: a newly collected batch's first run);
    None when there is no manifest."""
    items = _load_manifest(os.path.join(folder, "MANIFEST.yaml"))
    if items is None:
        return None
    if split:
        items = [i for i in items if i.get("split", "dev") == split]
    if files:
        unknown = sorted(set(files) - {i["file"] for i in items})
        if unknown:
            raise SystemExit(f"watch_quality: --files: not in the manifest{' for --split ' + split if split else ''}: "
                             f"{', '.join(unknown)}")
        items = [i for i in items if i["file"] in set(files)]
    items = _shard(items)
    run = run or (lambda path: _in_temporary_folder(path, steps))
    rows, missing = [], []
    for i, item in enumerate(items, 1):
        path = os.path.join(folder, item["file"])
        if not os.path.isfile(path):
            missing.append(item["file"])
            continue
        report = run(path)
        entries = _entries(report)
        row = {"file": item["file"], "split": item.get("split", "dev"), "entry": item["entry"],
               "findings": _codes(report), "found": item["entry"] in entries,
               "first": bool(entries) and entries[0] == item["entry"], "error": report["run"].get("error"),
               "internal_errors": len(report["run"].get("internal_errors") or [])}
        rows.append(row)
        progress(f"[bugs {i}/{len(items)}] {item['file']} ({row['split']}, {item['entry']}): "
                 f"{', '.join(row['findings']) or 'no finding'}")
    if missing:
        progress(f"bugs: {len(missing)} of {len(items)} scripts missing: skipped")
    splits = {}
    for split in sorted({r["split"] for r in rows}):
        part = [r for r in rows if r["split"] == split]
        splits[split] = {"scripts": len(part), "found": sum(r["found"] for r in part),
                         "first": sum(r["first"] for r in part)}
    return {"rows": rows, "listed": len(items), "missing": missing, "splits": splits}


# ---------------------------------------------------------------- printing

def _ratio(a: int, b: int) -> str:
    return f"{a}/{b} ({a / b:.0%})" if b else "-"


def case_table(section: dict, markdown: bool) -> list:
    head = ["entry", "bug pairs", "first finding", "any finding", "fixed flagged", "look-alikes flagged"]
    body = []
    for entry, e in sorted(section["per_entry"].items()):
        body.append([entry, str(e["bugs"]), _ratio(e["first"], e["bugs"]), _ratio(e["any"], e["bugs"]),
                     f"{e['fixed_flagged']}/{e['fixed']}" if e["fixed"] else "-",
                     f"{e['lookalikes_flagged']}/{e['lookalikes']}" if e["lookalikes"] else "-"])
    t = section["total"]
    body.append(["all", str(t["bugs"]), _ratio(t["first"], t["bugs"]), _ratio(t["any"], t["bugs"]),
                 f"{t['fixed_flagged']}/{t['fixed']}", f"{t['lookalikes_flagged']}/{t['lookalikes']}"])
    return _table(head, body, markdown)


def real_table(section: dict, markdown: bool) -> list:
    head = ["script", "steps", "findings", "judged true", "judged false", "not judged"]
    body = [[r["file"], str(r["steps"]), ", ".join(r["findings"]) or "-", str(r["judged_true"]),
             str(r["judged_false"]), str(r["unjudged"])] for r in section["rows"]]
    lines = _table(head, body, markdown)
    per = section["false_alarms_per_script"]
    lines.append("")
    lines.append(f"{section['ran']} of {section['listed']} scripts run ({len(section['missing'])} not restored, "
                 f"{len(section['changed'])} changed, skipped; {section['errors']} ended with an error); "
                 f"{section['false_alarms']} false alarms (judged false or not judged) = "
                 f"{'-' if per is None else f'{per:.2f}'} per script, on "
                 f"{section['scripts_with_false_alarm']} scripts")
    return lines


def bug_table(section: dict, markdown: bool) -> list:
    head = ["split", "scripts", "entry among findings", "entry first"]
    body = [[split, str(s["scripts"]), _ratio(s["found"], s["scripts"]), _ratio(s["first"], s["scripts"])]
            for split, s in section["splits"].items()]
    lines = _table(head, body, markdown)
    if section["missing"]:
        lines.append(f"({len(section['missing'])} listed scripts missing, skipped)")
    return lines


def _table(head: list, body: list, markdown: bool) -> list:
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|",
                *["| " + " | ".join(row) + " |" for row in body]]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
            for row in [head, *body]]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=["cases", "real", "bugs"], help="run one section only")
    p.add_argument("--json", metavar="FILE", help="write every row and count to FILE")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown (for BENCHMARKS.md)")
    p.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds for one real script (default 600)")
    p.add_argument("--bug-steps", type=int, default=BUG_STEPS, metavar="N",
                   help=f"optimizer steps watched per real-bug script (default {BUG_STEPS}; 0: the whole run, "
                        f"reported at its end, as `kb watch -- python train.py` without --steps)")
    p.add_argument("--device", default="cpu", help="the default device for our own scripts, and whether the "
                   "third-party ones see a GPU (default cpu: they see none)")
    p.add_argument("--split", choices=["dev", "test"], help="real silent bugs: run this split only (default both)")
    p.add_argument("--shard", default="0/1", metavar="K/N", help="run every Nth script of each section from the Kth")
    p.add_argument("--files", nargs="+", metavar="FILE", help="real silent bugs: run only these manifest items "
                   "(as the manifest names them, e.g. dev/NAME.py): a newly collected batch's first run")
    args = p.parse_args(argv)
    global DEVICE, SHARD
    try:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 0 <= k < n:
            raise ValueError
    except ValueError:
        p.error(f"--shard: expected K/N with 0 <= K < N, got {args.shard!r}")
    DEVICE, SHARD = args.device, (k, n)
    results: dict = {"device": DEVICE, "shard": args.shard}
    out: list = []
    if args.only in (None, "cases"):
        results["cases"] = cases = case_section()
        t = cases["total"]
        out += ["## Cases: bug/fixed pairs and look-alikes", "",
                f"{t['bugs']} bug scripts, {t['fixed']} fixed twins, {t['lookalikes']} look-alikes; "
                f"first finding = the bug's entry is the first finding within {CASE_STEPS} optimizer steps", "",
                *case_table(cases, args.markdown), ""]
        out.append(f"findings on fixed twins: {t['fixed_findings']}; look-alikes with a finding: "
                   f"{t['lookalikes_flagged']}/{t['lookalikes']}")
        for row in cases["rows"]:
            if (row["kind"] == "bug" and not row["first"]) or (row["kind"] != "bug" and row["findings"]):
                out.append(f"  {row['kind']} {row['script']}: {', '.join(row['findings']) or 'no finding'}")
        out.append("")
    if args.only in (None, "real"):
        real = results["real"] = real_section(timeout=args.timeout)
        out += ["## Real healthy scripts (false alarms)", ""]
        if real is None:
            note = f"skipped: no {os.path.relpath(os.path.join(REAL, 'MANIFEST.yaml'), ROOT)}"
            progress(f"real: {note}")
            out.append(note)
        else:
            out += real_table(real, args.markdown)
        out.append("")
    if args.only in (None, "bugs"):
        bugs = results["bugs"] = bug_section(steps=args.bug_steps, split=args.split, files=args.files)
        watched = f"the first {args.bug_steps} optimizer steps" if args.bug_steps else "the whole run"
        out += ["## Real silent bugs (from public threads)", "", f"each script watched for {watched}", ""]
        if bugs is None:
            note = f"skipped: no {os.path.relpath(os.path.join(BUGS, 'MANIFEST.yaml'), ROOT)}"
            progress(f"bugs: {note}")
            out.append(note)
        else:
            out += bug_table(bugs, args.markdown)
        out.append("")
    print("\n".join(out).rstrip())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
