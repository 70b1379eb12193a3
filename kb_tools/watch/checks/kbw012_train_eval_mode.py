"""KBW012: a model evaluated in training mode, or trained in eval mode.

Criterion, evaluation in training mode: at least 2 forward passes in a row (no optimizer step
between them) of a model some optimizer trains, run with grad disabled (torch.no_grad,
inference_mode) while the model is in training mode and holds Dropout (p > 0) or BatchNorm
layers in training mode; called from the user's code (torch's own update_bn is not counted).
Criterion, evaluation in training mode with grad enabled: at least 2 forward passes (on sampled
steps) of such a model in training mode, with grad enabled, each followed by another forward of
the model with no backward() call in between and whose output never received a gradient by the
next optimizer step, on at most half of the steps from the first such forward to the last: an
evaluation that forgot both model.eval() and no_grad, run now and then (a GAN's two discriminator
passes before one backward, or a gradient-accumulation loop, do reach backward; a pass on every
step whose output is only used detached, the pseudo-labels of a weak view, is part of training;
a model whose output another watched model takes as its input, a GAN's generator, is not judged
this way: its samples drawn for a picture are not an evaluation).
Criterion, training in eval mode: on at least 3 optimizer steps with a backward(), the model's
forward ran with grad enabled while the model itself was in eval mode and holds Dropout (p > 0)
or BatchNorm layers, with no forward in training mode in the same step, and a live optimizer holds
its parameters (a frozen network run in eval mode for its features, with the gradient passing
through it to something else, is not being trained). A submodule frozen with .eval() inside a
model in training mode is deliberate (frozen-batchnorm-stats) and not reported.
"""
from __future__ import annotations

import weakref

import torch

from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.tensors import first_tensor
from kb_tools.watch.sites import caller_is_torch, user_site

MIN_EVAL_FORWARDS = 2
MIN_TRAIN_STEPS = 3
MAX_CANDIDATES = 8   # forwards of one model awaiting the next optimizer step to be judged
_DROPOUT = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout,
            torch.nn.FeatureAlphaDropout)
_NORM = (torch.nn.modules.batchnorm._BatchNorm,)


class _Model:
    __slots__ = ("info", "layers", "trained", "run", "run_step", "eval_forwards", "eval_step", "eval_site",
                 "pending", "train_steps", "train_first", "last", "candidates", "unreached", "unreached_step",
                 "unreached_last", "unreached_steps", "output", "feeds")

    def __init__(self, info, layers):
        self.info = info          # the session's ModelInfo: class and site, alive or not
        self.layers = layers      # [(name, module)] whose behaviour depends on the mode
        self.trained = None       # whether an optimizer holds its parameters (decided once)
        self.run = 0              # grad-free train-mode forwards in a row since the last step
        self.run_step = None
        self.eval_forwards = 0    # grad-free train-mode forwards counted (runs of >= 2)
        self.eval_step = self.eval_site = None
        self.pending = None       # (step, backward calls, parameters held by an optimizer) of an eval-mode forward with grad
        self.train_steps = 0
        self.train_first = None
        self.last = None          # (backward calls, step, [got a gradient]) of the last train-mode forward with grad
        self.candidates: list = []  # (step, [got a gradient]) of such forwards followed by a forward, no backward between
        self.unreached = 0        # of those, the ones whose output got no gradient by the next optimizer step
        self.unreached_step = None
        self.unreached_last = None  # the last step with such a forward, and how many distinct steps had one
        self.unreached_steps = 0
        self.output = None        # weak reference to its last output with grad, to recognise it as another's input
        self.feeds = False        # another watched model took that output as its input


def _effects(st: _Model, when: str) -> str:
    """What the wrong mode does to the layers this model has."""
    kinds = {name.rsplit("(", 1)[-1].rstrip(")") for name, _ in st.layers}
    dropout = any("Dropout" in k for k in kinds)
    norm = any("Norm" in k for k in kinds)
    if when == "eval":
        parts = (["dropout on"] if dropout else []) + (["BatchNorm using and updating batch statistics"] if norm else [])
    else:
        parts = (["dropout off"] if dropout else []) + (["BatchNorm statistics frozen"] if norm else [])
    return ", ".join(parts)


class TrainEvalMode(Check):
    __doc__ = __doc__
    code = "KBW012"
    name = "train-eval-mode"
    entry = "train-eval-mode"
    title = "no_grad forwards in training mode (Dropout/BatchNorm active), or training steps in eval mode"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.models: dict[int, _Model] = {}  # id(ModelInfo) -> state

    def _state(self, info, module) -> _Model:
        st = self.models.get(id(info))
        if st is None or st.info is not info:
            layers = [(f"{self.session.module_name(m)} ({type(m).__name__})", weakref.ref(m)) for m in module.modules()
                      if (isinstance(m, _DROPOUT) and m.p > 0) or isinstance(m, _NORM)]
            st = self.models[id(info)] = _Model(info, layers)
        return st

    def on_root_forward(self, info, grad_enabled):
        module = info.module
        if module is None:
            return
        st = self._state(info, module)
        if not st.layers:
            return
        s = self.session
        self._settle(st)
        if grad_enabled:
            if module.training:
                st.pending = None  # this step trains in training mode: any earlier eval forward was not training
            else:
                st.pending = (s.step, s.backward_calls, self._held(st))
            return
        if not module.training or not any(getattr(m(), "training", False) for _, m in st.layers):
            return
        if st.trained is None:
            held = s.trainable_ids()
            st.trained = any(id(p) in held for p in module.parameters())
        if not st.trained or caller_is_torch(depth=4):
            return
        if st.run_step != s.step:
            st.run, st.run_step = 0, s.step
        st.run += 1
        if st.run >= MIN_EVAL_FORWARDS:
            st.eval_forwards += 1 if st.run > MIN_EVAL_FORWARDS else MIN_EVAL_FORWARDS
            if st.eval_step is None:
                st.eval_step, st.eval_site = s.step, user_site(depth=4)

    def on_root_output(self, info, output, grad_enabled):
        module = info.module
        if not grad_enabled or module is None or not module.training:
            return
        st = self._state(info, module)
        if not st.layers:
            return
        s = self.session
        if st.last is not None and st.last[0] == s.backward_calls:  # no backward() since its last forward
            if len(st.candidates) >= MAX_CANDIDATES:
                st.candidates = [c for c in st.candidates if not c[1][0]]  # reached ones are settled
            if len(st.candidates) < MAX_CANDIDATES:
                st.candidates.append(st.last[1:])
        out = first_tensor(output)
        if not isinstance(out, torch.Tensor) or out.grad_fn is None:
            # no gradient can reach it (parameters frozen for this pass), or a leaf such as a parameter
            # returned as it is, whose hooks would outlive the step: not judged
            st.last = None
            return
        reached = [False]
        out.register_hook(lambda grad, flag=reached: flag.__setitem__(0, True))
        st.output = weakref.ref(out)
        st.last = (s.backward_calls, s.step, reached)

    def on_module_input(self, module, args):
        if not args or not isinstance(args[0], torch.Tensor) or not args[0].requires_grad \
                or not self.session.is_model(module):
            return
        for st in self.models.values():
            if st.output is not None and st.output() is args[0] and st.info.module is not module:
                st.feeds = True

    def on_step_post(self, optimizer):
        for st in self.models.values():
            if not st.candidates:
                continue
            if st.trained is None:
                held = self.session.trainable_ids()
                module = st.info.module
                st.trained = module is not None and any(id(p) in held for p in module.parameters())
            for step, reached in st.candidates:
                if st.trained and not reached[0] and any(getattr(m(), "training", False) for _, m in st.layers):
                    st.unreached += 1
                    if st.unreached_step is None:
                        st.unreached_step = step
                    if st.unreached_last != step:
                        st.unreached_last, st.unreached_steps = step, st.unreached_steps + 1
            st.candidates.clear()

    def _held(self, st: _Model) -> bool:
        """Whether a live optimizer holds the model's parameters now (read at the forward, while the
        run's objects are alive): a frozen network run in eval mode with grad enabled (a feature
        extractor the gradient passes through) is not being trained."""
        module = st.info.module
        held = self.session.trainable_ids()
        return module is not None and any(id(p) in held for p in module.parameters())

    def _settle(self, st: _Model) -> None:
        """Count a step trained in eval mode once it is over: it had a backward() after the forward."""
        s = self.session
        if st.pending is not None and s.step > st.pending[0]:
            if s.backward_calls > st.pending[1] and st.pending[2]:
                st.train_steps += 1
                if st.train_first is None:
                    st.train_first = st.pending[0]
            st.pending = None

    def findings(self) -> list:
        out = []
        for st in self.models.values():
            info = st.info
            self._settle(st)
            if st.eval_forwards >= MIN_EVAL_FORWARDS:
                active = [n for n, m in st.layers if getattr(m(), "training", True)]
                message = (f"{plural(st.eval_forwards, 'forward pass', 'forward passes')} of {info.cls} "
                           f"({created_at('model', info.site)}) ran under no_grad with the model in training mode, "
                           f"first at step {st.eval_step} (called at {st.eval_site}): its {names(active, 3)} "
                           f"{'is' if len(active) == 1 else 'are'} still in training mode while it is evaluated "
                           f"({_effects(st, 'eval')}); call model.eval() before evaluating and model.train() after")
                out.append(self.finding(message, where=st.eval_site, step=st.eval_step, evidence={
                    "forwards": st.eval_forwards, "first_step": st.eval_step, "called_at": st.eval_site,
                    "layers": [n for n, _ in st.layers][:20]}))
            now_and_then = st.unreached_steps == 1 or \
                2 * st.unreached_steps <= (st.unreached_last or 0) - (st.unreached_step or 0) + 1
            if st.unreached >= MIN_EVAL_FORWARDS and st.eval_forwards < MIN_EVAL_FORWARDS and now_and_then \
                    and not st.feeds:
                message = (f"{plural(st.unreached, 'forward pass', 'forward passes')} of {info.cls} "
                           f"({created_at('model', info.site)}) ran in training mode with grad enabled and no "
                           f"backward() ever reached their output, first at step {st.unreached_step}: an evaluation "
                           f"that calls neither model.eval() nor torch.no_grad(), so {names([n for n, _ in st.layers], 3)} "
                           f"{'is' if len(st.layers) == 1 else 'are'} in training mode while it is evaluated "
                           f"({_effects(st, 'eval')}); call model.eval() (and use torch.no_grad()) before evaluating "
                           f"and model.train() after")
                out.append(self.finding(message, where=info.site, step=st.unreached_step, evidence={
                    "forwards": st.unreached, "first_step": st.unreached_step,
                    "layers": [n for n, _ in st.layers][:20]}))
            if st.train_steps >= MIN_TRAIN_STEPS:
                message = (f"{info.cls} ({created_at('model', info.site)}) was trained in eval mode on "
                           f"{plural(st.train_steps, 'optimizer step')} from step {st.train_first}: its forward ran "
                           f"with grad enabled while the model was in eval mode, so {names([n for n, _ in st.layers], 3)} "
                           f"{'behaves' if len(st.layers) == 1 else 'behave'} as in evaluation ({_effects(st, 'train')}); "
                           f"call model.train() again after evaluating")
                out.append(self.finding(message, where=info.site, step=st.train_first, confidence=0.8, evidence={
                    "steps": st.train_steps, "first_step": st.train_first,
                    "layers": [n for n, _ in st.layers][:20]}))
        return out
