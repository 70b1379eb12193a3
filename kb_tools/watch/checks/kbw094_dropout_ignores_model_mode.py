"""KBW094: a dropout inside the model that never asks whether the model is training, seen while it
trains, so it will keep dropping units after model.eval() (KBW038 sees the same fault only once an
evaluation runs, often long after the first steps).

Criterion: on sampled steps, while a watched model's call runs in training mode, a functional
dropout (F.dropout and its 1d/2d/3d forms) drops units (p > 0) with its `training` argument left
out, so it takes the default True; or F.scaled_dot_product_attention is given a dropout_p > 0 (the
kernel has no training flag: the caller must pass 0 in eval mode); or a 0/1 mask is drawn by hand
with one keep probability strictly between 0 and 1 (`x.new_empty(n).bernoulli_(1 - p)`,
`torch.bernoulli(torch.full_like(x, keep))`), or from at least two uniform draws that the same line
thresholds (`(torch.rand(x.shape) > p).float()`).
Counted only when the call comes from the user's code (torch's own functions pass their flag) and no
frame on its path, from the calling line up to the model's own forward, names anything that could
gate it on the mode: a name or a string holding "train", "eval", "infer", "determin",
"grad_enabled" or a Monte Carlo marker (`if self.training:`, `training=False` in the signature,
`mode == "eval"`, `torch.is_grad_enabled()`). One call site seen on at least MIN_STEPS sampled
steps. An explicit `training=True` is a choice (Monte Carlo dropout) and is not counted.
"""
from __future__ import annotations

import sys
import types

from kb_tools.watch.checks import ATTENTION_DROPOUT, Check, plural
from kb_tools.watch.checks.kbw038_dropout_in_eval import single_keep_probability
from kb_tools.watch.sites import library_file, show_path

MIN_STEPS = 2
MAX_SITES = 32
MAX_FRAMES = 24  # frames walked from the dropout call up to the model's forward
MODE_WORDS = ("train", "eval", "infer", "determin", "grad_enabled", "monte", "mc_drop", "mcdrop")
_MODULE_PY = "module.py"


def _names(code) -> tuple:
    """Every name a code object reads or binds, and its string constants."""
    return code.co_names + code.co_varnames + code.co_cellvars + code.co_freevars + tuple(
        c for c in code.co_consts if isinstance(c, str))


def _mentions_mode(code, cache: dict) -> bool:
    found = cache.get(code)
    if found is None:
        found = cache[code] = any(word in name.lower() for name in _names(code) for word in MODE_WORDS)
    return found


class DropoutIgnoresModelMode(Check):
    __doc__ = __doc__
    code = "KBW094"
    name = "dropout-ignores-model-mode"
    entry = "functional-dropout-in-eval"
    title = "a dropout in the model's forward that never reads the training flag: it will drop units in eval mode too"
    confidence = 0.75

    def __init__(self, session):
        super().__init__(session)
        self.current = None     # the model whose training-mode call is running, on a sampled step
        self.mentions: dict = {}  # code object -> whether it names the mode
        self.sites: dict = {}   # (file:line, kind) -> [sampled steps seen, last of them, first, p, model]
        self.paths: dict = {}   # tuple of code objects on a call path -> file:line, or None when gated

    def on_root_forward(self, model, grad_enabled):
        module = model.module
        self.current = model if (self.session.sampled and module is not None and module.training) else None

    def on_root_output(self, model, output, grad_enabled):
        if self.current is model:
            self.current = None

    def on_dropout(self, p, training_given=True, kind="F.dropout"):
        if self.current is not None and not training_given:
            self._seen(p, kind)

    def on_bernoulli(self, probability):
        if self.current is not None:
            keep = single_keep_probability(probability)
            if keep is not None:
                self._seen(keep, "a hand-drawn mask")

    def on_uniform_mask(self, site):
        if self.current is not None:
            self._seen(None, "a hand-drawn mask")

    def _site(self) -> str | None:
        """file:line of the user's dropout call when no frame up to the model's forward names the mode.

        Walks from the first frame outside torch and kb_tools up to the frame of torch's module call
        of the watched model (whose `self` is it); torch's own frames in between are module calls."""
        root = self.current.module
        frame: types.FrameType | None = sys._getframe(1)
        while frame is not None and library_file(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            return None
        first, path, reached = frame, [], False
        for _ in range(MAX_FRAMES):
            if frame is None:
                break
            code = frame.f_code
            if not library_file(code.co_filename):
                path.append(code)
            elif code.co_filename.endswith(_MODULE_PY) and frame.f_locals.get("self") is root:
                reached = True
                break
            frame = frame.f_back
        if not reached:
            return None  # the model's call was not found within MAX_FRAMES: too deep to judge
        key = (tuple(path), first.f_lineno)
        if key not in self.paths:
            gated = any(_mentions_mode(code, self.mentions) for code in path)
            self.paths[key] = None if gated else f"{show_path(first.f_code.co_filename)}:{first.f_lineno}"
        return self.paths[key]

    def _seen(self, p, kind: str) -> None:
        """One dropout call (`p`: F.dropout's p, or the probability a mask was drawn with)."""
        if len(self.paths) > 4 * MAX_SITES:
            return
        site = self._site()
        if site is None:
            return
        st = self.sites.get((site, kind))
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[(site, kind)] = [0, None, self.session.step, p, self.current]
        if st[1] != self.session.step:
            st[0] += 1
            st[1] = self.session.step

    def findings(self) -> list:
        out = []
        for (site, kind), (steps, _, first, p, model) in self.sites.items():
            if steps < MIN_STEPS:
                continue
            where = model.site
            inside = f"{model.cls} ({'created at ' + where if where else 'a watched model'})"
            if kind == "F.dropout":
                what = (f"F.dropout(p={p:g}) at {site}, inside {inside}, is called without a training argument, so it "
                        f"takes the default training=True")
                fix = "pass training=self.training, or use an nn.Dropout module"
            elif kind == ATTENTION_DROPOUT:
                what = (f"F.scaled_dot_product_attention(dropout_p={p:g}) at {site}, inside {inside}, is given its "
                        f"dropout on every call; the kernel has no training flag of its own")
                fix = "pass dropout_p=p if self.training else 0.0"
            else:
                drawn = f"probability {p:.3g} per element" if p is not None else "uniform draws thresholded"
                what = (f"a 0/1 mask drawn by hand ({drawn}) at {site}, inside {inside}, is drawn on every call")
                fix = "draw it only under `if self.training:`"
            message = (f"{what}, and nothing on its call path reads the model's training flag: it ran on "
                       f"{plural(steps, 'sampled training step')} and will run the same after model.eval(), so "
                       f"evaluation outputs will be random; {fix}")
            rate = None if p is None else round(p, 4)
            evidence = {"call": site, "kind": kind, "probability" if kind == "a hand-drawn mask" else "p": rate,
                        "model": model.cls, "sampled_steps": steps, "first_step": first}
            out.append(self.finding(message, where=site, step=first, evidence=evidence))
        return out
