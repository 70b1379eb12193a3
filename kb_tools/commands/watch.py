"""`kb watch`: run a training script under instrumentation and name what its run shows.

The command's body lives in kb_tools.watch (the only package that imports torch); this module
imports it when the command is built or run, so every other command stays torch-free."""
from __future__ import annotations

NAME = "watch"
SUMMARY = "run a training script under instrumentation and name what it shows; exit 1 when found"
DESCRIPTION = (
    "Run a training script (kb watch -- python train.py ARGS, or torchrun ... train.py) with no change "
    "to its code, and report what the run shows (a parameter with a gradient that never moves, "
    "probabilities fed to cross_entropy, a gradient nothing clears, ...) with the KB entry that explains "
    "it and the numbers measured. Exit 0 nothing found, 1 findings or the script failed, 2 usage.")


def add_arguments(p) -> None:
    from kb_tools.watch.command import add_arguments as watch_arguments
    watch_arguments(p)


def run(args) -> int:
    """Run a training script under instrumentation; exit 1 when something is found."""
    from kb_tools.watch.command import run_command
    return run_command(args)
