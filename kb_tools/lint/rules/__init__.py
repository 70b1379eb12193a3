"""The lint rules, one module per rule: `kblNNN_<name>.py` holds CODE, NAME, ENTRY (the entry that
explains the cause), MESSAGE (a str.format template), `check(analysis, emit)`, and a docstring
with the fixed sections the docs are generated from: what it finds, why it hurts training,
example, use instead.

Adding a rule is one new module here plus its cases in tests/lint/cases.yaml: `ALL` finds it.
"""
from __future__ import annotations

import os
from importlib import import_module

SECTIONS = ("What it finds", "Why it hurts training", "Example", "Use instead")


def discover(folder: str, package: str) -> list:
    """Every rule module (kbl*.py) of `folder`, imported as `package`.<name>, in code order."""
    names = sorted(f[:-3] for f in os.listdir(folder) if f.startswith("kbl") and f.endswith(".py"))
    return [import_module(f"{package}.{name}") for name in names]


ALL = discover(os.path.dirname(os.path.abspath(__file__)), __name__)
