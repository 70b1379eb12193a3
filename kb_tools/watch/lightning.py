"""`kb watch` inside a Lightning `Trainer`: `Trainer(..., callbacks=[WatchCallback()])`.

Lightning owns the loop and the optimizers, so the callback starts watching when training
starts (the LightningModule and the optimizers the Trainer set up) and prints the report when
fitting ends, or when the run raises. Needs `lightning` (an optional dependency): importing
this module without it is an ImportError that says how to install it.
"""
from __future__ import annotations

try:
    from lightning.pytorch.callbacks import Callback
except ImportError as exc:  # an optional dependency
    raise ImportError("kb_tools.watch.lightning needs lightning: python -m pip install lightning") from exc

from kb_tools.watch.api import watch


class WatchCallback(Callback):
    """Watches a Lightning fit from on_train_start to on_fit_end; `.findings` afterwards.
    The keyword arguments are those of `watch()` (steps, every, report, stream)."""

    def __init__(self, **options):
        self.options = options
        self.handle = None
        self.findings: list = []

    def on_train_start(self, trainer, pl_module):
        if self.handle is None:
            objects = [pl_module, *trainer.optimizers]
            self.handle = watch(*objects, where="passed by the Lightning Trainer (WatchCallback)", **self.options)

    def _stop(self):
        if self.handle is not None:
            self.findings = self.handle.stop()
            self.handle = None

    def on_fit_end(self, trainer, pl_module):
        self._stop()

    def on_exception(self, trainer, pl_module, exception):
        self._stop()
