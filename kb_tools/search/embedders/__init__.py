"""The dense side's sentence embedders, one module per embedder, all behind one small interface.

An embedder has `name` (stored in the index, so a query is embedded by what made it),
`dim`, `fingerprint` (which files it was loaded from: vectors of other files are never
compared), `vocab` (the tokens it knows whole), `slow` (optional: it imports numpy anyway),
and three methods: `encode_query(text) -> list of floats` (pure Python, for one query),
`encode(texts) -> float32 matrix` (numpy, for an index build) and `can_build() -> bool`.

To add one: a module here with a `load() -> embedder | None`, and a line in LOADERS.
"""
from __future__ import annotations

import sys

# name -> "module:function" that loads it (imported only when that embedder is asked for)
LOADERS = {"static-minilm": "static:load", "minilm-l6": "minilm:load_model"}
_LOADED = {}  # name (None: the preferred one) -> embedder or None, loaded once per process


def _loader(name: str):
    from importlib import import_module
    module, function = LOADERS[name].split(":")
    return getattr(import_module(f"{__name__}.{module}"), function)


def load(name: str | None = None):
    """The embedder called `name`, or by default the one an index is built with: the packaged
    static token vectors, or the whole MiniLM model where $KB_MODEL_DIR names its files; None
    when it does not load (the ranking is then lexical)."""
    if name not in _LOADED:
        preferred = _LOADED.get(None)
        if name is None:
            from kb_tools.search.embedders import minilm, static
            model = minilm.load_model() if minilm.model_dir() else None
            if model is None and minilm.model_dir():  # named, yet unreadable: say so, once
                print(f"kb: the MiniLM model files in {minilm.model_dir()} are missing or damaged; "
                      "searching with the static token vectors", file=sys.stderr)
            _LOADED[None] = model or static.load()
        elif preferred is not None and preferred.name == name:
            _LOADED[name] = preferred
        else:
            _LOADED[name] = _loader(name)() if name in LOADERS else None
    return _LOADED[name]
