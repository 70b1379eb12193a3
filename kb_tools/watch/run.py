"""Run a user's training script under instrumentation, in this process, as `python SCRIPT ARGS` would.

`run_watched()` is what `kb watch` calls when the named python is the one running kb. As a
module, `python -m kb_tools.watch.run SCRIPT ARGS` is the same run in a child: what `kb watch`
starts for another interpreter, and what each torchrun rank runs. Its settings come from the
environment (KB_WATCH_OUT, the folder it writes its report to, one file per rank;
KB_WATCH_STEPS; KB_WATCH_EVERY; KB_WATCH_MODULE=1 when SCRIPT is a module name, as `-m`;
KB_WATCH_NO_EVALUATION_PASS=1 for --no-evaluation-pass; KB_WATCH_NO_FAST_FORWARD=1 for
--no-fast-forward).

After --steps N optimizer steps the training loader's epoch ends early, so the script's own
evaluation runs under watch (Session.end_epoch_early), a few training steps after it, and then
the rest of the script in brief, each later training epoch cut to one batch (Session.cuts)
until the script ends or a limit is reached; then, or at once when no DataLoader feeds the steps,
a hook raises StopWatching; it unwinds the user's code (their `finally` blocks run)
and is caught here. The user's own exceptions are printed as Python
prints them (without the runner's frames) and become the run's exit status, 1, as in Python.
"""
from __future__ import annotations

import os
import runpy
import sys
import traceback
import types
from dataclasses import dataclass

ENV_OUT, ENV_STEPS, ENV_EVERY, ENV_MODULE = "KB_WATCH_OUT", "KB_WATCH_STEPS", "KB_WATCH_EVERY", "KB_WATCH_MODULE"
ENV_NO_PASS = "KB_WATCH_NO_EVALUATION_PASS"
ENV_NO_FAST_FORWARD = "KB_WATCH_NO_FAST_FORWARD"
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # kb_tools/


@dataclass
class Outcome:
    exit_status: int = 0
    stopped: bool = False
    error: str | None = None


def _exit_status(exc: SystemExit) -> int:
    """The status Python gives sys.exit(code): None is 0, an int itself, anything else 1 (printed)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _user_traceback(tb):
    """`tb` without the frames of this runner, runpy and kb_tools' own wrappers: what Python
    itself would have shown for the user's script."""
    frames = []
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not (name.startswith(_HERE) or name == runpy.__file__ or name.startswith("<frozen runpy")):
            frames.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(frames):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def print_user_exception(exc: BaseException) -> None:
    exc.__traceback__ = _user_traceback(exc.__traceback__)
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    sys.stderr.flush()


def run_watched(target: str, args: list, session, *, module: bool = False) -> Outcome:
    """Run `target` (a script path, or a module name with `module`) as __main__ with sys.argv
    [target, *args], under `session`'s instrumentation; return how it ended."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    if module:
        sys.argv = [target, *args]
        sys.path[0:1] = [os.getcwd()]
    else:
        sys.argv = [target, *args]
        sys.path[0:1] = [os.path.dirname(os.path.abspath(target))]
    outcome = Outcome()
    session.install()
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        if not session.stopped:
            outcome.exit_status = _exit_status(exc)
    except BaseException as exc:  # noqa: BLE001 - the user's error (StopWatching included) ends their run
        if _ended_evaluation_pass(session, exc):
            pass
        elif not session.stopped or not _is_stop(exc):
            if isinstance(exc, KeyboardInterrupt):
                outcome.exit_status, outcome.error = 130, "KeyboardInterrupt"
            else:
                outcome.exit_status = 1
                outcome.error = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
            print_user_exception(exc)
    finally:
        session.end()
        session.uninstall()
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        sys.stdout.flush()
    if session.pass_state is not None:  # --steps reached: the run is cut short however it then ended
        session.pass_state.ended_by = session.pass_state.ended_by or "the script's end"
        outcome.stopped = True
        outcome.exit_status = 0 if outcome.error is None else outcome.exit_status
    else:
        outcome.stopped = session.stopped
    return outcome


def _ended_evaluation_pass(session, exc: BaseException) -> bool:
    """An error of the script's after --steps, in the evaluation pass (which may be a consequence
    of its epoch cut short): printed, recorded in the pass, and the run counts as stopped."""
    state = session.pass_state
    if state is None or session.stopped or isinstance(exc, KeyboardInterrupt):
        return False
    error = f"an error in the script: {type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
    if state.fast_forward:   # the rest of the script, run in brief, raised (its epochs were cut short)
        state.fast_forward_end = error
        where = "while the rest of the script ran in brief"
    elif state.resumed:   # the evaluation had ended; the training after it raised
        state.ended_by = f"{state.ended_by}, then {error} in the training after it"
        where = "in the training watched after the evaluation pass"
    else:
        state.ended_by, where = error, "in the evaluation pass"
    print(f"kb watch: --steps {session.max_steps} reached; the script then raised this {where} "
          "(its training epoch had been cut short):", file=sys.stderr)
    print_user_exception(exc)
    return True


def _is_stop(exc: BaseException) -> bool:
    from kb_tools.watch.sites import StopWatching
    return isinstance(exc, StopWatching)


def build_report(session, outcome: Outcome, command: list | None = None, script: str | None = None) -> dict:
    """The report of one run (one rank): findings, the run's facts and how it ended."""
    from kb_tools.watch.report import REPORT_VERSION
    findings = session.findings()
    run = session.facts()
    run.update(command=command, script=script, exit_status=outcome.exit_status, error=outcome.error,
               stopped_after_steps=session.max_steps if outcome.stopped else None, ranks=[session.rank])
    return {"version": REPORT_VERSION, "findings": findings, "run": run,
            "checks": [c.code for c in session.checks]}


def _env_int(name: str, default):
    value = os.environ.get(name)
    return int(value) if value else default


def main(argv=None) -> int:
    """`python -m kb_tools.watch.run SCRIPT ARGS`: one child (or torchrun rank) of `kb watch`."""
    from kb_tools.watch.report import write_report
    from kb_tools.watch.session import DEFAULT_EVERY, Session
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m kb_tools.watch.run SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    rank = int(os.environ["RANK"]) if os.environ.get("RANK", "").isdigit() else None
    module = os.environ.get(ENV_MODULE) == "1"
    session = Session(every=_env_int(ENV_EVERY, DEFAULT_EVERY), max_steps=_env_int(ENV_STEPS, None), rank=rank,
                      evaluation_pass=os.environ.get(ENV_NO_PASS) != "1",
                      fast_forward=os.environ.get(ENV_NO_FAST_FORWARD) != "1")
    outcome = run_watched(argv[0], argv[1:], session, module=module)
    report = build_report(session, outcome, command=argv, script=argv[0])
    out = os.environ.get(ENV_OUT)
    if out:
        write_report(os.path.join(out, f"rank-{rank if rank is not None else 0}.json"), report)
    else:  # run by hand: the text report on stderr
        from kb_tools.watch.report import format_text
        print(format_text(report, sys.stderr), file=sys.stderr)
    return 0 if outcome.stopped else outcome.exit_status


if __name__ == "__main__":
    sys.exit(main())
