"""`kb watch`: its arguments and its handler.

    kb watch [--steps N [--no-evaluation-pass]] [--every K] [--json] [--report FILE] -- python train.py ARGS
    kb watch -- torchrun --nproc-per-node 2 train.py ARGS
    kb watch --list-checks [--json]

The script runs in this process when the named python is the one running kb; another
interpreter, or torchrun, runs `-m kb_tools.watch.run` in its place, and each child writes its
report to a temporary folder that this process merges. Importing this module does not import
torch: `--help` and the argument errors stay fast, and the parent of a child run never needs it.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

from kb_tools.core.util import KBError, UsageError

PYTHON_FLAGS_WITH_VALUE = ("-W", "-X", "-Q")
TORCHRUN_MODULE = "torch.distributed.run"


def add_arguments(p) -> None:
    import argparse
    p.add_argument("--steps", type=int, metavar="N", help="stop the run after N optimizer steps and report "
                   "(the script's finally blocks run); when a DataLoader feeds the steps, its epoch ends there "
                   "instead and the script's own evaluation runs once under watch first; default: run to the end")
    p.add_argument("--no-evaluation-pass", dest="evaluation_pass", action="store_false",
                   help="stop right at --steps N; by default the training epoch then ends early, the "
                   "script's own evaluation runs once under watch (up to 200 batches), and the run stops "
                   "after the first 3 training steps that follow it, then runs the rest of the script in brief")
    p.add_argument("--no-fast-forward", dest="fast_forward", action="store_false",
                   help="stop after the evaluation pass; by default the rest of the script then runs in "
                   "brief under watch (each later training epoch one batch, each other loader 2 batches "
                   "a pass, at most 200 steps), so what it does late, such as a closing evaluation or a "
                   "schedule's later epochs, is checked too")
    p.add_argument("--every", type=int, default=None, metavar="K", help="after the first 10 steps, check "
                   "every K-th step (default 10); every step costs more")
    p.add_argument("--report", metavar="FILE", help="also write the JSON report to FILE (atomically)")
    p.add_argument("--list-checks", action="store_true", help="every check: code, entry, what it measures")
    p.add_argument("--json", action="store_true", help="the findings and the run's facts as one JSON object "
                   "on stdout (the script's own output goes to stderr)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="python SCRIPT ARGS, python -m MODULE ARGS, SCRIPT.py ARGS or torchrun ... SCRIPT ARGS")


def run_command(args) -> int:
    """The handler of `kb watch`."""
    if args.list_checks:
        return list_checks(args.json)
    command = list(args.command or [])
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("watch: name the training command after --, e.g. kb watch -- python train.py")
    if args.steps is not None and args.steps < 1:
        raise UsageError("watch: --steps must be at least 1")
    if not getattr(args, "evaluation_pass", True) and args.steps is None:
        raise UsageError("watch: --no-evaluation-pass changes how --steps N stops; it needs --steps")
    if not getattr(args, "fast_forward", True) and args.steps is None:
        raise UsageError("watch: --no-fast-forward changes how --steps N stops; it needs --steps")
    if args.every is not None and args.every < 1:
        raise UsageError("watch: --every must be at least 1")
    if args.report:
        args.report = os.path.abspath(args.report)  # the script may change the working directory
    plan = plan_command(command)
    if plan["mode"] == "inprocess":
        report = _run_here(plan, args)
    else:
        report = _run_child(plan, args)
    return emit(report, args)


def emit(report: dict, args) -> int:
    from kb_tools.watch.report import exit_code, format_text, to_json_text, write_report
    if args.report:
        try:
            write_report(args.report, report)
        except OSError as exc:
            raise KBError(f"watch: cannot write the report to {args.report}: {exc.strerror or exc}") from None
    if args.json:
        sys.stdout.write(to_json_text(report))
    else:
        print(format_text(report, sys.stdout))
    return exit_code(report)


def list_checks(as_json: bool) -> int:
    rows = [cls.describe() for cls in _checks()]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        width = max(len(r["entry"]) for r in rows)
        for r in rows:
            print(f"{r['code']}  {r['entry']:<{width}}  {r['title']}")
    return 0


def _checks():
    try:
        from kb_tools.watch.checks import all_checks
        return all_checks()
    except ImportError as exc:
        raise KBError(f"watch: needs torch in the Python that runs kb ({exc})") from None


# ---------------------------------------------------------------- what to run, and where

def _is_python(name: str) -> bool:
    base = os.path.basename(name)
    return base.startswith("python") and not base.endswith(".py")


def _same_interpreter(path: str) -> bool:
    """Whether `path` (from PATH) is the Python running kb: the same file, or a name for it in the
    same bin folder (a virtual environment's python, python3 and python3.11)."""
    here = os.path.abspath(sys.executable)
    there = os.path.abspath(path)
    if there == here:
        return True
    return os.path.dirname(there) == os.path.dirname(here) and os.path.realpath(there) == os.path.realpath(here)


def _which(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise UsageError(f"watch: {name}: command not found")
    return found


def plan_command(command: list) -> dict:
    """How to run `command`: in this process, or as a child (another python, or torchrun)."""
    head = command[0]
    if head.endswith(".py"):  # kb watch -- train.py ARGS: the Python running kb
        return _script_plan(sys.executable, [], command, inprocess=True)
    if os.path.basename(head) == "torchrun":
        return _torchrun_plan([_which(head)], command[1:])
    if _is_python(head):
        exe = _which(head)
        flags, rest = _python_flags(command[1:])
        if rest[:2] == ["-m", TORCHRUN_MODULE]:
            return _torchrun_plan([exe, "-m", TORCHRUN_MODULE], rest[2:])
        return _script_plan(exe, flags, rest, inprocess=_same_interpreter(exe) and set(flags) <= {"-u"})
    raise UsageError(f"watch: cannot watch `{head}`: give python SCRIPT, python -m MODULE, SCRIPT.py "
                     f"or torchrun ... SCRIPT")


def _python_flags(tokens: list):
    """Split `python`'s own options from what follows them (-m MODULE or the script)."""
    flags, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        if token == "-c" or token.startswith("-c"):
            raise UsageError("watch: python -c is not supported: save the code to a file and name it")
        if token == "-m" or not token.startswith("-") or token == "-":
            break
        if token == "--":
            i += 1
            break
        flags.append(token)
        if token in PYTHON_FLAGS_WITH_VALUE and i + 1 < len(tokens):
            flags.append(tokens[i + 1])
            i += 1
        i += 1
    return flags, tokens[i:]


def _script_plan(exe: str, flags: list, rest: list, inprocess: bool) -> dict:
    module = False
    if rest[:1] == ["-m"]:
        if len(rest) < 2:
            raise UsageError("watch: python -m needs a module name")
        module, rest = True, rest[1:]
    if not rest:
        raise UsageError("watch: name the script to run, e.g. kb watch -- python train.py")
    target, args = rest[0], rest[1:]
    if target == "-":
        raise UsageError("watch: a script from standard input is not supported: save it to a file")
    if not module:
        if not os.path.exists(target):
            raise UsageError(f"watch: {target}: no such file")
        if not os.path.isfile(target):
            raise UsageError(f"watch: {target}: not a file")
    return {"mode": "inprocess" if inprocess else "child", "exe": [exe, *flags], "target": target,
            "args": args, "module": module, "command": [os.path.basename(exe), *flags, *rest]}


def _torchrun_plan(launcher: list, tokens: list) -> dict:
    """torchrun's own options, then `-m kb_tools.watch.run` where the script was."""
    try:
        from torch.distributed.run import get_args_parser
    except ImportError as exc:
        raise KBError(f"watch: torchrun needs torch.distributed in the Python that runs kb ({exc})") from None
    parser = get_args_parser()
    try:
        with contextlib.redirect_stderr(open(os.devnull, "w")):
            parsed = parser.parse_args(tokens)
    except SystemExit:
        raise UsageError(f"watch: torchrun does not accept: {' '.join(tokens)}") from None
    if getattr(parsed, "no_python", False) or getattr(parsed, "run_path", False):
        raise UsageError("watch: torchrun --no-python and --run-path are not supported")
    script_args = list(parsed.training_script_args)
    cut = len(tokens) - len(script_args) - 1
    options = [t for t in tokens[:cut] if t not in ("-m", "--module")]
    module = len(options) != cut
    target = parsed.training_script
    if not module and not os.path.isfile(target):
        raise UsageError(f"watch: {target}: no such file")
    return {"mode": "torchrun", "exe": [*launcher, *options, "-m", "kb_tools.watch.run"], "target": target,
            "args": script_args, "module": module, "command": ["torchrun", *tokens]}


# ---------------------------------------------------------------- running

def _run_here(plan: dict, args) -> dict:
    try:
        from kb_tools.watch.run import build_report, run_watched
        from kb_tools.watch.session import DEFAULT_EVERY, Session
    except ImportError as exc:
        raise KBError(f"watch: needs torch in the Python that runs kb ({exc})") from None
    session = Session(every=args.every or DEFAULT_EVERY, max_steps=args.steps,
                      evaluation_pass=getattr(args, "evaluation_pass", True),
                      fast_forward=getattr(args, "fast_forward", True))
    redirect = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    with redirect:
        outcome = run_watched(plan["target"], plan["args"], session, module=plan["module"])
    return build_report(session, outcome, command=plan["command"], script=plan["target"])


def _run_child(plan: dict, args) -> dict:
    from kb_tools.watch.report import merge_reports
    from kb_tools.watch.run import ENV_EVERY, ENV_MODULE, ENV_NO_FAST_FORWARD, ENV_NO_PASS, ENV_OUT, ENV_STEPS
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory(prefix="kb-watch-") as out:
        env = dict(os.environ)
        env[ENV_OUT] = out
        env[ENV_MODULE] = "1" if plan["module"] else "0"
        env[ENV_EVERY] = str(args.every) if args.every else ""
        env[ENV_STEPS] = str(args.steps) if args.steps else ""
        env[ENV_NO_PASS] = "0" if getattr(args, "evaluation_pass", True) else "1"
        env[ENV_NO_FAST_FORWARD] = "0" if getattr(args, "fast_forward", True) else "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
        argv = [*plan["exe"], plan["target"], *plan["args"]] if plan["mode"] == "torchrun" else \
            [*plan["exe"], "-m", "kb_tools.watch.run", plan["target"], *plan["args"]]
        sys.stdout.flush()
        try:
            proc = subprocess.run(argv, env=env, stdout=_stderr_fd() if args.json else None)
        except OSError as exc:
            raise KBError(f"watch: cannot start {argv[0]}: {exc.strerror or exc}") from None
        reports = []
        for path in sorted(glob.glob(os.path.join(out, "rank-*.json"))):
            with open(path, encoding="utf-8") as fh:
                reports.append(json.load(fh))
    if not reports:
        raise KBError(f"watch: {' '.join(plan['command'])} exited with status {proc.returncode} before "
                      f"kb watch could report (see its output above; torch and kb_tools must import in "
                      f"{plan['exe'][0]})")
    report = merge_reports(reports, exit_status=_child_status(proc.returncode, reports), command=plan["command"])
    report["run"]["script"] = plan["target"]
    return report


def _stderr_fd():
    """Where a child's stdout goes under --json: this process's stderr (fd 2 when it has none of its own)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


def _child_status(code: int, reports: list) -> int:
    """The run's status: 0 when every rank stopped cleanly after --steps; else the child's own."""
    if all(r["run"].get("stopped_after_steps") for r in reports) and all(not r["run"].get("error") for r in reports):
        return 0
    return code
