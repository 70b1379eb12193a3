"""`kb watch`: run a training script under instrumentation and name the KB entry behind what it shows.

`kb search` reads what users say and `kb lint` reads code; both stop where words and code
shapes stop. At run time most of these bugs are plain: a parameter with a gradient that never
moves, probabilities reaching cross_entropy, a model in training mode under no_grad, a gradient
that grows because nothing clears it. This subpackage watches a run through torch's global
hooks, with no change to the user's code, and reports each cause with its KB entry and the
numbers measured in that run.

It is the only part of kb_tools that imports torch, and it imports only kb_tools.core besides
itself; nothing outside it imports it at module level (the CLI's handler imports it lazily).
Importing this package does not import torch either: `watch()` does, when called.

In code: `from kb_tools.watch import watch; watch(model, optimizer)` watches the rest of the
run and prints the report at exit (or use the returned handle's .report() and .findings).
"""
from __future__ import annotations


def watch(*objects, steps=None, every=None, report=None, stream=None):
    """Watch the rest of this process's training: `objects` are the model(s), optimizer(s),
    scheduler(s) and loader(s) to describe (others are found as they are used). Returns a
    `Watch` handle; the text report is printed to stderr at exit (`report=FILE` also writes the
    JSON there). See kb_tools.watch.api."""
    from kb_tools.watch.api import watch as _watch
    return _watch(*objects, steps=steps, every=every, report=report, stream=stream)


__all__ = ["watch"]
