"""`watch(model, optimizer)`: the one-line use of `kb watch` inside a training script.

The objects passed are registered with the place of the call as their site (they were created
before watching began, so their constructors were not seen); everything else is found as in
`kb watch`. With `steps=N` the watching stops after N optimizer steps and the run goes on. The
report is printed to stderr when the process exits, or when the handle is stopped.
"""
from __future__ import annotations

import atexit
import sys

import torch

from kb_tools.watch.report import format_text
from kb_tools.watch.run import Outcome, build_report
from kb_tools.watch.session import DEFAULT_EVERY, Session
from kb_tools.watch.sites import user_site


class Watch:
    """The handle `watch()` returns."""

    def __init__(self, session: Session, report_path: str | None, stream):
        self.session = session
        self.report_path = report_path
        self.stream = stream
        self.done = False

    @property
    def findings(self) -> list:
        """The findings so far, most confident first (dicts, as in `kb watch --json`)."""
        return self.session.findings()

    def to_dict(self) -> dict:
        return build_report(self.session, Outcome(stopped=self.session.stopped), script=sys.argv[0] if sys.argv else None)

    def report(self) -> str:
        """The text report of what was found so far."""
        return format_text(self.to_dict(), self.stream or sys.stderr)

    def stop(self) -> list:
        """Stop watching, print the report (and write report=FILE), return the findings. Idempotent."""
        if not self.done:
            self.done = True
            self.session.end()
            self.session.uninstall()
            data = self.to_dict()
            if self.report_path:
                from kb_tools.watch.report import write_report
                write_report(self.report_path, data)
            stream = self.stream or sys.stderr
            sys.stdout.flush()  # the script's own output first, as a terminal shows it
            print(format_text(data, stream), file=stream)
            atexit.unregister(self.stop)
        return self.findings

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def watch(*objects, steps=None, every=None, report=None, stream=None, where=None) -> Watch:
    """See kb_tools.watch.watch; `where` describes how the objects were passed, for a framework's
    callback whose caller is the framework, not the user's code."""
    session = Session(every=every or DEFAULT_EVERY, max_steps=steps, stop_run=False)
    if where is None:
        site = user_site(depth=2)
        where = f"passed to watch() at {site}" if site else "passed to watch()"
    for obj in objects:
        if isinstance(obj, torch.nn.Module):
            session.add_model(obj, site=where)
        elif isinstance(obj, torch.optim.Optimizer):
            session.add_optimizer(obj, site=where)
        elif isinstance(obj, torch.optim.lr_scheduler.LRScheduler):
            session.add_scheduler(obj, site=where)
        elif isinstance(obj, torch.utils.data.DataLoader):
            session.add_loader(obj, site=where)
        else:
            raise TypeError(f"watch() takes models, optimizers, schedulers and data loaders, not "
                            f"{type(obj).__name__}")
    session.install()
    handle = Watch(session, report, stream)
    atexit.register(handle.stop)
    return handle
