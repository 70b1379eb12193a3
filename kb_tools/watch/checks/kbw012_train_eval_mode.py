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
or BatchNorm layers, with no forward in training mode in the same step, a backward() and a step of
an optimizer holding its parameters followed (another network's step, taken between this model's
evaluation and its own training forward, does not count), and a live optimizer holds its
parameters (a frozen network run in eval mode for its features, with the gradient passing
through it to something else, is not being trained); at least one of those layers in eval mode
lies outside every frozen part (a submodule with parameters, none held by an optimizer: a linear
probe's backbone kept in eval mode under its trained head is deliberate). A submodule frozen with .eval() inside a
model in training mode is deliberate (frozen-batchnorm-stats) and not reported.
Criterion, layers no train()/eval() call reached: a forward pass run with grad disabled, from the
user's code, of a model in which Dropout (p > 0) or BatchNorm (running statistics, a momentum)
layers of torch's own forward, built by a constructor call of the run (a deep copy keeps the mode
it copied), are in training mode although no Module.train() or eval() call ever reached them, and
either (a) the model itself is in eval mode: at least 1 such forward (the layers were built or
attached after model.eval(), by a layer-replacement helper, or an overridden train() hid them from
it); or (b) the model is in training mode, never trained by an optimizer, its weights loaded with
load_state_dict (into it, a module inside it or one around it), and at least 2 such forwards ran in
a row with no optimizer step between them, on at most half of the steps from the first such run
to the last (a fresh model built to evaluate a checkpoint and never put in eval mode; a teacher run
on every step is part of training). Runs of at least 5 consecutive calls on one input are Monte
Carlo sampling, on purpose, and not counted; a model on which train() was called is deliberate;
layers that are only BatchNorm and are later put in eval mode and evaluated had their statistics
re-estimated on purpose; in (b), a model later run with grad in training mode is one about to be
trained (its grad-free passes were a check of its shapes, or of where it starts).
"""
from __future__ import annotations

import weakref

import torch

from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.kbw038_dropout_in_eval import MC_CALLS  # a run of Monte Carlo sampling, counted alike
from kb_tools.watch.checks.tensors import fingerprint, first_tensor
from kb_tools.watch.sites import caller_is_torch, user_site

MIN_EVAL_FORWARDS = 2
MIN_TRAIN_STEPS = 3
MAX_CANDIDATES = 8   # forwards of one model awaiting the next optimizer step to be judged
_DROPOUT = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout,
            torch.nn.FeatureAlphaDropout)
_NORM = (torch.nn.modules.batchnorm._BatchNorm,)
MIN_UNSET_FORWARDS = {"attached": 1, "loaded": 2}
MAX_LOADED = 32       # modules load_state_dict was called on, remembered
# the forwards that read `training` (a subclass that overrides forward may drop units in both modes: MC dropout)
_MODE_FORWARDS = frozenset(c.forward for c in _DROPOUT + _NORM + (torch.nn.SyncBatchNorm,))


def _mode_matters(m) -> bool:
    """Whether the layer behaves differently in training mode: dropout with p > 0, or BatchNorm that
    tracks running statistics with a momentum (momentum=None is a cumulative re-estimation)."""
    if type(m).forward not in _MODE_FORWARDS:
        return False
    if isinstance(m, _DROPOUT):
        return m.p > 0
    return isinstance(m, _NORM) and m.track_running_stats and m.running_mean is not None and m.momentum is not None


def _eval_layer_in_a_trained_part(module, held) -> bool:
    """Whether a Dropout (p > 0) or BatchNorm layer in eval mode lies below `module` outside every
    frozen part: a submodule with parameters none of which an optimizer holds (`held`: their ids)
    is left out whole, with the layers inside it."""
    for child in module.children():
        params = list(child.parameters())
        if params and not any(id(p) in held for p in params):
            continue
        if ((isinstance(child, _DROPOUT) and child.p > 0) or isinstance(child, _NORM)) and not child.training:
            return True
        if _eval_layer_in_a_trained_part(child, held):
            return True
    return False


class _Unset:
    """Grad-free forwards of one model whose mode-dependent layers no train()/eval() call reached."""
    __slots__ = ("forwards", "steps", "first", "last", "site", "run", "run_step", "layers", "layer_site", "loaded_at")

    def __init__(self):
        self.forwards = self.steps = self.run = 0
        self.first = self.last = self.run_step = None
        self.site = self.layer_site = self.loaded_at = None
        self.layers: list = []


class _Model:
    __slots__ = ("info", "layers", "trained", "run", "run_step", "eval_forwards", "eval_step", "eval_site",
                 "pending", "train_steps", "train_first", "last", "candidates", "unreached", "unreached_step",
                 "unreached_last", "unreached_steps", "output", "feeds", "unset", "scan_step", "loaded_at", "group",
                 "call", "tallies", "recalibrated", "trained_after")

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
        self.unset: list = []     # [(name, module, site)] in training mode no train()/eval() call reached (last scan)
        self.scan_step = None
        self.loaded_at = None     # where load_state_dict gave it its weights (last scan)
        self.group = None         # [kind, fingerprint, calls, step, site, layers] of consecutive forwards on one input
        self.call = None          # [kind, step, site, fingerprint] of the last such forward, its input still to be read
        self.tallies: dict = {}   # kind -> _Unset
        self.recalibrated = False  # its unset BatchNorm layers were later put in eval mode and evaluated
        self.trained_after = False  # run with grad in training mode after such forwards: a model about to be trained


def _effects(layers: list, when: str) -> str:
    """What the wrong mode does to these layers ("name (Class)")."""
    kinds = {name.rsplit("(", 1)[-1].rstrip(")") for name in layers}
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
        self.loaded: list = []  # (module, site) of load_state_dict calls, weakly
        self.probes: dict = {}  # id(module) -> (module, handle of a one-call pre hook): loaded between sampled steps

    def on_state_dict_loaded(self, module, strict, result, site):
        s = self.session
        self.loaded = [(ref, at) for ref, at in self.loaded if ref() is not None and ref() is not module]
        if len(self.loaded) < MAX_LOADED:
            self.loaded.append((weakref.ref(module), site))
        if not s.sampled and module.training and not s.watches(module) and id(module) not in self.probes \
                and len(self.probes) < MAX_LOADED and self._has_unset(module):
            # a model built to be evaluated between sampled steps (after the last one, often) is watched from
            # its first call, as it would be from a call on a sampled step
            from kb_tools.watch.hooks import ModelHook
            self.probes = {k: v for k, v in self.probes.items() if v[0]() is not None}
            self.probes[id(module)] = (weakref.ref(module), module.register_forward_pre_hook(ModelHook(self._probe)))

    def _probe(self, module, args) -> None:
        """The first call of a module loaded between sampled steps: a model when no watched model holds it."""
        probe = self.probes.get(id(module))
        if probe is None or probe[0]() is not module:  # a copy of it, which carries the hook along
            return
        del self.probes[id(module)]
        probe[1].remove()
        s = self.session
        if s.stopped or torch.is_grad_enabled() or s.watches(module) or not self._has_unset(module) \
                or any(module is m for info in s.models if info.module is not None for m in info.module.modules()):
            return
        info = s.add_model(module)
        if info is not None:  # its own pre hook missed this call: it was registered during it
            s.dispatch("on_root_forward", info, False)
            s.dispatch("on_root_input", info, args, False)

    def _has_unset(self, module) -> bool:
        """Whether the module holds a mode-dependent layer in training mode that no train()/eval() call reached."""
        return any(self._never_switched(m) for m in module.modules())

    def _never_switched(self, m) -> bool:
        """A Dropout/BatchNorm layer in training mode, built by a constructor call of this run, that no
        train()/eval() call ever reached."""
        s = self.session
        return isinstance(m, _DROPOUT + _NORM) and m.training and _mode_matters(m) and m not in s.modes_set \
            and m in s.module_sites

    def on_end(self):
        for _, handle in self.probes.values():
            handle.remove()
        self.probes.clear()

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
        self._take(st)
        if st.unset and not grad_enabled and not module.training:
            self._recalibrated(st)
        if not grad_enabled:
            self._unset_forward(st, module)
        else:
            if st.group is not None:
                self._close(st)
            if module.training and st.tallies:
                st.trained_after = True
        if not st.layers:
            return
        s = self.session
        self._settle(st)
        if grad_enabled:
            if module.training:
                st.pending = None  # this step trains in training mode: any earlier eval forward was not training
            else:
                st.pending = (s.step, s.backward_calls, self._held(st), self._own_steps(st))
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

    def _unset_forward(self, st: _Model, module) -> None:
        """A grad-free forward: note it when layers no train()/eval() call reached are in training mode."""
        s = self.session
        kind = "attached" if not module.training else "loaded"
        if kind == "loaded":
            if st.trained is None:
                held = s.trainable_ids()
                st.trained = any(id(p) in held for p in module.parameters())
            if st.trained:  # a model an optimizer trains is judged by the first criterion
                self._close(st)
                return
        if st.scan_step is None or (st.scan_step != s.step and s.sampled):
            self._scan(st, module)
        layers = [u for u in st.unset if getattr(u[1](), "training", False) and u[1]() not in s.modes_set]
        if not layers or (kind == "loaded" and st.loaded_at is None) or caller_is_torch(depth=4):
            self._close(st)
            return
        st.call = [kind, s.step, user_site(depth=4), None, layers]

    def _scan(self, st: _Model, module) -> None:
        """The model's mode-dependent layers in training mode that no train()/eval() call reached and that a
        constructor call of this run built (once per sampled step: layers may be swapped in place)."""
        s = self.session
        st.scan_step = s.step
        st.unset = [(f"{s.module_names.get(id(m), path or type(m).__name__)} ({type(m).__name__})", weakref.ref(m),
                     s.module_sites.get(m)) for path, m in module.named_modules() if self._never_switched(m)]
        st.loaded_at = None
        if not st.unset or not module.training:
            return
        inside = {id(m) for m in module.modules()}
        for ref, site in self.loaded:
            loaded = ref()
            if loaded is not None and (id(loaded) in inside or any(m is module for m in loaded.modules())):
                st.loaded_at = site or "?"
                break

    def _recalibrated(self, st: _Model) -> None:
        """Evaluated in eval mode after its unset BatchNorm layers were put in eval mode: the grad-free forwards
        in training mode before re-estimated their statistics."""
        layers = [u[1]() for u in st.unset]
        if layers and all(isinstance(m, _NORM) and m in self.session.modes_set and not m.training
                          for m in layers if m is not None):
            st.recalibrated = True

    def on_root_input(self, info, args, grad_enabled):
        st = self.models.get(id(info))
        if st is None or st.call is None or st.call[3] is not None:
            return
        x = first_tensor(args)
        st.call[3] = (fingerprint(x) if isinstance(x, torch.Tensor) else None) or ()

    def _take(self, st: _Model) -> None:
        """Add the last noted forward to its run of calls on one input (its input is known by now)."""
        call, st.call = st.call, None
        if call is None:
            return
        kind, step, site, fp, layers = call
        g = st.group
        if g is not None and g[0] == kind and fp and g[1] == fp:
            g[2] += 1
            return
        self._close(st)
        st.group = [kind, fp, 1, step, site, layers]

    def _close(self, st: _Model) -> None:
        """Count a run of calls on one input, unless it is Monte Carlo sampling."""
        g, st.group = st.group, None
        if g is None or g[2] >= MC_CALLS:
            return
        kind, _, calls, step, site, layers = g
        t = st.tallies.get(kind)
        if t is None:
            t = st.tallies[kind] = _Unset()
        if t.run_step != step:
            t.run, t.run_step = 0, step
        before, t.run = t.run, t.run + calls
        need = MIN_UNSET_FORWARDS[kind]
        if t.run < need:
            return
        t.forwards += calls if before >= need else t.run
        if before < need:
            t.steps += 1
            t.last = step
            if t.first is None:
                t.first, t.site = step, site
                t.layers = [u[0] for u in layers]
                t.layer_site = layers[0][2]
                t.loaded_at = st.loaded_at

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
        run's objects are alive) and one of its layers in eval mode sits in a part it trains: a
        frozen network run in eval mode with grad enabled (a feature extractor the gradient passes
        through) is not being trained, nor is a frozen backbone kept in eval mode under a trained
        head (a linear probe)."""
        module = st.info.module
        held = self.session.trainable_ids()
        return module is not None and any(id(p) in held for p in module.parameters()) \
            and _eval_layer_in_a_trained_part(module, held)

    def _own_steps(self, st: _Model) -> int:
        """Steps taken so far by the optimizers that hold the model's parameters."""
        module = st.info.module
        if module is None:
            return 0
        own = {id(p) for p in module.parameters()}
        return sum(info.steps for info in self.session.optimizers.values()
                   if info.optimizer is not None and any(id(p) in own for p in self.session.params_of(info.optimizer)))

    def _settle(self, st: _Model) -> None:
        """Count a step trained in eval mode once it is over: it had a backward() after the forward, and
        an optimizer of the model's own stepped (another network's step, between the evaluation of
        this one and its own training forward, is not this model trained in eval mode)."""
        s = self.session
        if st.pending is not None and s.step > st.pending[0]:
            if s.backward_calls > st.pending[1] and st.pending[2] and self._own_steps(st) > st.pending[3]:
                st.train_steps += 1
                if st.train_first is None:
                    st.train_first = st.pending[0]
            st.pending = None

    def findings(self) -> list:
        out = self._unset_findings()
        for st in self.models.values():
            info = st.info
            self._settle(st)
            kinds = [n for n, _ in st.layers]
            if st.eval_forwards >= MIN_EVAL_FORWARDS:
                active = [n for n, m in st.layers if getattr(m(), "training", True)]
                message = (f"{plural(st.eval_forwards, 'forward pass', 'forward passes')} of {info.cls} "
                           f"({created_at('model', info.site)}) ran under no_grad with the model in training mode, "
                           f"first at step {st.eval_step} (called at {st.eval_site}): its {names(active, 3)} "
                           f"{'is' if len(active) == 1 else 'are'} still in training mode while it is evaluated "
                           f"({_effects(kinds, 'eval')}); call model.eval() before evaluating and model.train() after")
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
                           f"({_effects(kinds, 'eval')}); call model.eval() (and use torch.no_grad()) before evaluating "
                           f"and model.train() after")
                out.append(self.finding(message, where=info.site, step=st.unreached_step, evidence={
                    "forwards": st.unreached, "first_step": st.unreached_step,
                    "layers": [n for n, _ in st.layers][:20]}))
            if st.train_steps >= MIN_TRAIN_STEPS:
                message = (f"{info.cls} ({created_at('model', info.site)}) was trained in eval mode on "
                           f"{plural(st.train_steps, 'optimizer step')} from step {st.train_first}: its forward ran "
                           f"with grad enabled while the model was in eval mode, so {names([n for n, _ in st.layers], 3)} "
                           f"{'behaves' if len(st.layers) == 1 else 'behave'} as in evaluation ({_effects(kinds, 'train')}); "
                           f"call model.train() again after evaluating")
                out.append(self.finding(message, where=info.site, step=st.train_first, confidence=0.8, evidence={
                    "steps": st.train_steps, "first_step": st.train_first,
                    "layers": [n for n, _ in st.layers][:20]}))
        return out

    def _unset_findings(self) -> list:
        """The forwards of models whose layers no train()/eval() call reached, one finding per kind and model
        class and creation site (a helper that builds a model each round makes many)."""
        merged: dict = {}
        for st in self.models.values():
            self._take(st)
            self._close(st)
            for kind, t in st.tallies.items():
                if t.forwards < MIN_UNSET_FORWARDS[kind] or st.recalibrated or (kind == "loaded" and st.trained_after):
                    continue
                if kind == "loaded" and not (t.steps == 1 or 2 * t.steps <= t.last - t.first + 1):
                    continue
                key = (kind, st.info.cls, st.info.site)
                m = merged.get(key)
                if m is None:
                    merged[key] = [st.info, t, t.forwards, 1]
                else:
                    m[2] += t.forwards
                    m[3] += 1
                    if t.first < m[1].first:
                        m[1] = t
        out = []
        for (kind, _, _), (info, t, forwards, models) in merged.items():
            are = "is" if len(t.layers) == 1 else "are"
            layers = names(t.layers, 3)
            built = f" (built at {t.layer_site})" if t.layer_site else ""
            if models == 1:
                model = f"{info.cls} ({created_at('model', info.site)})" if info.site else info.cls
            else:
                model = f"{models} {info.cls} models" + (f" ({created_at('each', info.site)})" if info.site else "")
            evidence = {"forwards": forwards, "models": models, "first_step": t.first, "called_at": t.site,
                        "layers": t.layers[:20]}
            runs = f"{plural(forwards, 'forward pass', 'forward passes')} of {model} ran under no_grad"
            if kind == "attached":
                one = len(t.layers) == 1
                message = (f"{runs} with the model in eval mode, first at step {t.first} (called at {t.site}), but its "
                           f"{layers}{built} {are} in training mode: no train() or eval() call ever reached "
                           f"{'it' if one else 'them'}; {'it was' if one else 'they were'} built or attached after "
                           f"model.eval() (a new layer starts in training mode, as one a layer-replacement helper puts "
                           f"in does), or an overridden train() does not pass the call on, so the evaluation runs with "
                           f"{_effects(t.layers, 'eval')}; give each new layer the mode of the one it replaces, or call "
                           f"model.eval() again after changing layers")
                evidence["layer_built_at"] = t.layer_site
                out.append(self.finding(message, where=t.layer_site or t.site, step=t.first, evidence=evidence))
            else:
                message = (f"{runs} in training mode, first at step {t.first} (called at {t.site}), after "
                           f"load_state_dict gave {'it' if models == 1 else 'each'} its weights (at {t.loaded_at}): no "
                           f"optimizer trains it and neither model.eval() nor model.train() was ever called on it, so it "
                           f"is evaluated in the training mode it was built in and its {layers} {are} active "
                           f"({_effects(t.layers, 'eval')}); call model.eval() after loading the weights")
                evidence["loaded_at"] = t.loaded_at
                out.append(self.finding(message, where=t.loaded_at or t.site, step=t.first, evidence=evidence))
        return out
