"""`kb watch` inside a Hugging Face `Trainer`: `Trainer(..., callbacks=[WatchCallback()])`.

The Trainer builds its own optimizer and loop, so the script has no place to call `watch()`
by hand; the callback starts watching when training begins (with the Trainer's model,
optimizer and scheduler) and prints the report when it ends. Needs `transformers` (an optional
dependency): importing this module without it is an ImportError that says how to install it.
"""
from __future__ import annotations

try:
    from transformers import TrainerCallback
except ImportError as exc:  # an optional dependency
    raise ImportError("kb_tools.watch.huggingface needs transformers: python -m pip install transformers") from exc

from kb_tools.watch.api import watch


class WatchCallback(TrainerCallback):
    """Watches the Trainer's run from on_train_begin to on_train_end; `.findings` afterwards.
    The keyword arguments are those of `watch()` (steps, every, report, stream)."""

    def __init__(self, **options):
        self.options = options
        self.handle = None
        self.findings: list = []

    def on_train_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        if self.handle is None:
            objects = [o for o in (model, optimizer, lr_scheduler) if o is not None]
            self.handle = watch(*objects, where="passed by the Hugging Face Trainer (WatchCallback)", **self.options)

    def on_train_end(self, args, state, control, **kwargs):
        if self.handle is not None:
            self.findings = self.handle.stop()
            self.handle = None
