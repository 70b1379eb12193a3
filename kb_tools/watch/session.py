"""The state of one watched run: what it found (models, optimizers, schedulers, losses, loaders and
where the user's code created them), the step counter and the sampling rule, and the dispatch of
events from the hooks to the checks.

A step is one `step()` of the primary optimizer (the first one that steps). Step s is sampled
when s < warmup or s % every == 0; the expensive callbacks run only on sampled steps, and the
global module hooks are installed only for them (hooks.Instrumentation.forward_hooks). Everything
kept here is bounded by the program's structure (its models, optimizers and call sites), never
by the number of steps.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from kb_tools.watch.checks import EVENTS, all_checks, overridden
from kb_tools.watch.checks.tensors import grad_norm_of, inside_function_transform
from kb_tools.watch.sites import StopWatching, user_site

WARMUP = 10         # every step is sampled until this many steps have run
DEFAULT_EVERY = 10  # then every k-th step
EVALUATION_LOSSES = 64  # loss calls under no_grad watched on unsampled steps, per run (Session.take_evaluation_loss)
MAX_LISTED = 32     # at most this many models / optimizers / losses / loaders are described
EVALUATION_PASS_CALLS = 200  # batches, or model calls, the evaluation pass after --steps may take
# Optimizer steps watched, every one sampled, once training resumes after an evaluation that ran in the
# pass: an evaluation that leaves the model in eval mode shows only in the training after it (KBW012
# asks for 3 such steps).
RESUMED_STEPS = 3
# Then the rest of the script runs in brief (the fast-forward): each later epoch of the training loader
# gives one batch, each pass over another loader at most FAST_FORWARD_BATCHES, until the script ends or
# FAST_FORWARD_STEPS optimizer steps or FAST_FORWARD_CALLS model calls have run. What a script does late
# (its closing evaluation, a schedule's later epochs) is then watched too.
FAST_FORWARD_STEPS = 200
FAST_FORWARD_BATCHES = 2
FAST_FORWARD_CALLS = 2000


# ---------------------------------------------------------------- what the run holds


@dataclass
class ModelInfo:
    """A model: a module called from outside any other module's forward, holding parameters."""

    ref: weakref.ref
    cls: str
    site: str | None
    parameters: int
    trainable: int
    prefix: str = ""

    @property
    def module(self):
        return self.ref()

    def to_dict(self) -> dict:
        return {"class": self.cls, "site": self.site, "parameters": self.parameters, "trainable": self.trainable}


@dataclass
class OptimizerInfo:
    ref: weakref.ref
    cls: str
    site: str | None
    initial_lrs: list
    steps: int = 0
    groups: int = 0
    parameters: int = 0
    lrs: list = field(default_factory=list)

    @property
    def optimizer(self):
        return self.ref()

    def refresh(self) -> None:
        """Remember what the optimizer holds now: the report may come after the user's code dropped it."""
        opt = self.ref()
        if opt is not None:
            self.groups = len(opt.param_groups)
            self.parameters = sum(len(g["params"]) for g in opt.param_groups)
            self.lrs = [_lr(g) for g in opt.param_groups]

    def to_dict(self) -> dict:
        self.refresh()
        return {"class": self.cls, "site": self.site, "param_groups": self.groups, "parameters": self.parameters,
                "initial_lr": self.initial_lrs, "lr": self.lrs, "steps": self.steps}


@dataclass
class SchedulerInfo:
    ref: weakref.ref
    cls: str
    site: str | None
    optimizer_id: int
    first_epoch: int
    last_steps: int = 0
    from_start: bool = False   # created at the start of its schedule (last_epoch -1), whatever was loaded later

    def steps(self) -> int:
        """How many times step() ran since it was created (the last count seen, once it is gone)."""
        sched = self.ref()
        if sched is not None:
            self.last_steps = getattr(sched, "last_epoch", self.first_epoch) - self.first_epoch
        return self.last_steps

    def rebase(self, taken: int) -> None:
        """Its last_epoch was set from a checkpoint: keep counting from the `taken` steps seen so far."""
        sched = self.ref()
        if sched is not None:
            self.first_epoch = getattr(sched, "last_epoch", self.first_epoch) - taken

    def to_dict(self) -> dict:
        return {"class": self.cls, "site": self.site, "steps": self.steps()}


@dataclass
class ScalerInfo:
    """A GradScaler (torch.amp's, or torch.cuda.amp's, which derives from it)."""

    ref: weakref.ref
    site: str | None

    @property
    def scaler(self):
        return self.ref()


@dataclass
class ClipCall:
    """One sampled call of clip_grad_norm_ or clip_grad_value_, as the checks see it (dropped after
    the event)."""

    parameters: list
    max_norm: float  # the threshold: max_norm, or clip_value for kind "value"
    norm: object     # the total norm clip_grad_norm_ returned (a tensor), measured before clipping; None for "value"
    site: str | None
    kind: str = "norm"  # "norm" (clip_grad_norm_) or "value" (clip_grad_value_: every element to +-max_norm)


@dataclass
class LossInfo:
    kind: str             # the functional name: cross_entropy, nll_loss, ...
    site: str | None      # where the loss module was created, else where the function was called
    module: str | None    # the nn loss class, when it was called as a module
    calls: int = 0        # sampled calls

    def to_dict(self) -> dict:
        return {"kind": self.kind, "module": self.module, "site": self.site, "sampled_calls": self.calls}


@dataclass
class LoaderInfo:
    site: str | None
    batch_size: int | None
    batches: int = 0
    ref: weakref.ref | None = None   # the loader itself, while it lives (not in the report)

    def to_dict(self) -> dict:
        return {"site": self.site, "batch_size": self.batch_size, "batches": self.batches}


@dataclass
class LossCall:
    """One sampled call of a loss function, as the checks see it."""

    kind: str
    input: object
    target: object
    options: dict
    info: LossInfo
    grad_enabled: bool
    first: bool                      # the first sampled call at this site
    output: object = None
    evaluation: bool = False         # taken under no_grad on a step not sampled (only checks that watch evaluation see it)
    extra: dict = field(default_factory=dict)

    @property
    def site(self):
        return self.info.site

    @property
    def reduction(self) -> str:
        return self.options.get("reduction", "mean")


@dataclass
class SpreadCall:
    """A std or var call that returned NaN from one element per output value."""

    name: str
    input_shape: tuple
    output_shape: tuple
    grad_enabled: bool
    requires_grad: bool
    site: str | None


@dataclass
class EvaluationPass:
    """The part of the run after --steps: the training loader's epoch cut short, the script's own
    evaluation watched, then, when an evaluation ran, RESUMED_STEPS steps of the training that
    follows it, then the rest of the script in brief (`fast_forward`: each later training epoch one
    batch, see Session.cuts) or, with that off, the stop. `ended_by` says what ended
    the evaluation, `fast_forward_end` what ended the brief run (None: the script's end)."""

    loader: Any                      # weakref to the training loader
    serial: int | None               # the training iterator, whose next batch ends the epoch instead
    batches: int = 0
    model_calls: int = 0
    ended_by: str | None = None
    resumed: bool = False            # training has resumed after the evaluation: the pass is over
    resumed_steps: int = 0           # optimizer steps watched since
    fast_forward: bool = False       # the rest of the script runs in brief (Session.cuts)
    fast_forward_steps: int = 0
    fast_forward_calls: int = 0
    fast_forward_end: str | None = None

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"batches": self.batches, "model_calls": self.model_calls,
                               "ended_by": self.ended_by, "resumed_steps": self.resumed_steps}
        if self.fast_forward:
            out["fast_forward"] = {"steps": self.fast_forward_steps, "model_calls": self.fast_forward_calls,
                                   "ended_by": self.fast_forward_end or "the script's end"}
        return out


def _lr(group) -> float:
    lr = group.get("lr", 0.0)
    return float(lr.item() if isinstance(lr, torch.Tensor) else lr)


# ---------------------------------------------------------------- the session

class Session:
    """One watched run. Created by the runner (or `watch()`), installed, then read by the report."""

    def __init__(self, *, every: int = DEFAULT_EVERY, warmup: int = WARMUP, max_steps: int | None = None,
                 rank: int | None = None, checks=None, stop_run: bool = True, evaluation_pass: bool = True,
                 fast_forward: bool = True):
        self.every, self.warmup, self.max_steps, self.rank = every, warmup, max_steps, rank
        self.stop_run = stop_run     # raise StopWatching after max_steps (the runner), else just stop watching
        # After max_steps, end the training loader's epoch early so that the script's own evaluation
        # runs once under watch, then watch RESUMED_STEPS steps of the training after it, then the
        # rest of the script in brief, or stop (the runner only; see end_epoch_early and resume).
        self.evaluation_pass = evaluation_pass and stop_run
        self.fast_forward = fast_forward and self.evaluation_pass   # then the rest of the script, in brief
        self.pass_state: EvaluationPass | None = None
        self.pass_skipped: str | None = None  # why --steps N stopped the run with no evaluation pass
        self._last_batch: tuple[Any, int | None] = (None, None)   # (weakref to its loader, iterator serial)
        self.step = 0                # steps of the primary optimizer completed
        self.run_steps = 0           # the steps they stand for: a step of the brief run is a whole epoch
        self.sampled = True
        self.sampled_steps = 1       # step 0 is sampled
        self.stopped = False
        self.backward_calls = 0
        self._norms_before: dict[int, float | None] = {}  # id(optimizer) -> gradient norm before this sampled backward
        self.batches = 0
        self.depth = 0               # nesting of module forwards (sampled steps only)
        self.in_loss = self.in_backward = False
        self.current_loss_module = None
        self.models: list[ModelInfo] = []
        self.optimizers: dict[int, OptimizerInfo] = {}
        self.schedulers: list[SchedulerInfo] = []
        self.losses: dict[tuple, LossInfo] = {}
        self.loaders: dict[int, LoaderInfo] = {}
        self.scalers: list[ScalerInfo] = []
        self.module_names: dict[int, str] = {}
        self.members: weakref.WeakSet = weakref.WeakSet()  # the modules named there, alive: ids are reused
        self.param_names: dict[int, str] = {}
        self.param_owner: dict[int, int] = {}     # id(param) -> id(module that holds it directly)
        self.module_root: dict[int, int] = {}     # id(module) -> id(the watched model it belongs to)
        self.module_sites = weakref.WeakKeyDictionary()  # modules created while watching -> site
        self.modes_set: weakref.WeakSet = weakref.WeakSet()  # modules a train() or eval() call reached
        self.internal_errors: list[str] = []
        self.last_loss: LossCall | None = None     # the last sampled loss call (its tensors dropped)
        self._primary: int | None = None
        self._event = 0
        self._grad_cache: dict = {}
        self._trainable_cache: tuple[tuple[int, int] | None, frozenset] = (None, frozenset())
        self._model_hooks = []
        self._ended = False
        self.instrumentation: Any = None  # hooks.Instrumentation once installed
        classes = all_checks() if checks is None else checks
        self.checks = [cls(self) for cls in classes]
        # each event's handlers as bound methods, made once: a sampled step dispatches thousands of calls
        self._handlers = {event: [getattr(c, event) for c in self.checks if overridden(c, event)] for event in EVENTS}
        self._evaluation_checks = [c for c in self.checks if getattr(c, "watches_evaluation", False)]
        self.evaluation_losses_left = EVALUATION_LOSSES

    # ------------------------------------------------------------ install / uninstall

    def install(self) -> None:
        """Install the instrumentation; a session may be uninstalled and installed again (its state stays)."""
        from kb_tools.watch.hooks import Instrumentation
        if self.instrumentation is None:
            self.instrumentation = Instrumentation(self)
        self.instrumentation.install()
        if not self._model_hooks:
            for info in self.models:
                if info.module is not None:
                    self._hook_model(info.module)

    def _hook_model(self, module) -> None:
        try:
            from kb_tools.watch.hooks import ModelHook
            self._model_hooks.append(module.register_forward_pre_hook(ModelHook(self._model_pre_hook)))
            if self._handlers["on_root_output"]:
                self._model_hooks.append(module.register_forward_hook(ModelHook(self._model_post_hook)))
        except RuntimeError:  # a ScriptModule: no hooks
            pass

    def uninstall(self) -> None:
        if self.instrumentation is not None:
            self.instrumentation.uninstall()
        for handle in self._model_hooks:
            handle.remove()
        self._model_hooks = []

    @property
    def installed(self) -> bool:
        return self.instrumentation is not None and self.instrumentation.installed

    # ------------------------------------------------------------ dispatch

    def dispatch(self, event: str, *args, only=None) -> None:
        """Call `event` on every check that implements it (of those in `only`, when given); a check that
        raises is switched off and recorded (the user's run goes on). Nothing is dispatched inside a
        torch.func transform (vmap, grad): its tensors are stand-ins no check can read."""
        if inside_function_transform():
            return
        for handler in self._handlers[event]:
            if only is not None and handler.__self__ not in only:
                continue
            try:
                handler(*args)
            except StopWatching:
                raise
            except Exception as exc:  # noqa: BLE001 - a check's bug must never break the user's run
                self._disable(handler.__self__, event, exc)

    def _disable(self, check, event: str, exc: Exception) -> None:
        self.internal_errors.append(f"{check.code} {event}: {type(exc).__name__}: {exc}")
        for key, handlers in self._handlers.items():  # new lists: a dispatch under way goes on over the old one
            self._handlers[key] = [h for h in handlers if h.__self__ is not check]
        self.checks = [c for c in self.checks if c is not check]

    def is_sampled(self, step: int) -> bool:
        return step < self.warmup or step % self.every == 0

    # ------------------------------------------------------------ discovery

    def add_model(self, module, site: str | None = None) -> ModelInfo | None:
        """Register a model (a root module with parameters); a model that contains a known one replaces it."""
        for info in self.models:
            if info.module is module:
                return info
        if self.watches(module):  # a submodule of a watched model, called on its own
            return None
        if len(self.models) >= MAX_LISTED:
            return None
        params = list(module.named_parameters())
        if not params:
            return None
        contained = [info for info in self.models if info.module is not None and id(info.module) in
                     {id(m) for m in module.modules()}]
        for info in contained:
            self.models.remove(info)
        info = ModelInfo(ref=weakref.ref(module), cls=type(module).__name__,
                         site=site or self.module_sites.get(module), parameters=sum(p.numel() for _, p in params),
                         trainable=sum(p.numel() for _, p in params if p.requires_grad))
        self.models.append(info)
        self._rebuild_names()
        if self.installed:
            self._hook_model(module)
        return info

    def _rebuild_names(self) -> None:
        self.module_names.clear()
        self.members = weakref.WeakSet()
        self.param_names.clear()
        self.param_owner.clear()
        self.module_root.clear()
        many = len(self.models) > 1
        for info in self.models:
            module = info.module
            if module is None:
                continue
            info.prefix = f"{info.cls}." if many else ""
            for name, sub in module.named_modules():
                self.module_names.setdefault(id(sub), f"{info.prefix}{name}" if name else info.cls)
                try:
                    self.members.add(sub)
                except TypeError:  # a module class that made itself unhashable
                    pass
                self.module_root.setdefault(id(sub), id(module))
                for pname, p in sub.named_parameters(recurse=False):
                    key = id(p)
                    if key not in self.param_names:
                        self.param_names[key] = f"{info.prefix}{name + '.' if name else ''}{pname}"
                        self.param_owner[key] = id(sub)

    def _model_pre_hook(self, module, args):
        info = next((m for m in self.models if m.ref() is module), None)
        if info is not None and self.in_pass and not self.stopped:
            self._count_pass_call("model_calls")
        elif info is not None and self.fast_forwarding and not self.stopped:
            self._count_pass_call("fast_forward_calls", FAST_FORWARD_CALLS, "model calls")
        if self._handlers["on_root_forward"] or self._handlers["on_root_input"]:
            if info is not None:
                grad_enabled = torch.is_grad_enabled()
                self.dispatch("on_root_forward", info, grad_enabled)
                if self._handlers["on_root_input"]:
                    self.dispatch("on_root_input", info, args, grad_enabled)

    def _model_post_hook(self, module, args, output):
        info = next((m for m in self.models if m.ref() is module), None)
        if info is not None:
            self.dispatch("on_root_output", info, output, torch.is_grad_enabled())

    def root_call(self, module, args=()) -> None:
        """A module called outside any other forward on a sampled step: maybe a new model."""
        if self.watches(module) or isinstance(module, torch.nn.modules.loss._Loss):
            return
        info = self.add_model(module)
        if info is not None:  # its own pre hook missed this call: it was registered during it
            grad_enabled = torch.is_grad_enabled()
            self.dispatch("on_root_forward", info, grad_enabled)
            if self._handlers["on_root_input"]:  # the call's input too (an MC-dropout run starts with it)
                self.dispatch("on_root_input", info, args, grad_enabled)

    def add_optimizer(self, opt, site: str | None = None) -> OptimizerInfo:
        info = self.optimizers.get(id(opt))
        if info is None or info.optimizer is not opt:
            info = OptimizerInfo(ref=weakref.ref(opt), cls=type(opt).__name__, site=site,
                                 initial_lrs=[_lr(g) for g in opt.param_groups])
            info.refresh()
            if len(self.optimizers) < MAX_LISTED or id(opt) in self.optimizers:
                self.optimizers[id(opt)] = info
        return info

    def add_scheduler(self, sched, site: str | None) -> None:
        if len(self.schedulers) < MAX_LISTED and getattr(sched, "optimizer", None) is not None:
            self.schedulers.append(SchedulerInfo(ref=weakref.ref(sched), cls=type(sched).__name__, site=site,
                                                 optimizer_id=id(sched.optimizer),
                                                 first_epoch=getattr(sched, "last_epoch", 0),
                                                 from_start=getattr(sched, "last_epoch", None) == 0))

    def scheduler_info(self, sched) -> SchedulerInfo | None:
        return next((info for info in self.schedulers if info.ref() is sched), None)

    def add_scaler(self, scaler, site: str | None) -> None:
        if len(self.scalers) < MAX_LISTED:
            self.scalers.append(ScalerInfo(ref=weakref.ref(scaler), site=site))

    def live_scalers(self) -> list:
        return [s for s in (info.scaler for info in self.scalers) if s is not None]

    def add_loader(self, loader, site: str | None) -> None:
        if len(self.loaders) < MAX_LISTED:
            self.loaders[id(loader)] = LoaderInfo(site=site, batch_size=getattr(loader, "batch_size", None),
                                                  ref=weakref.ref(loader))

    # ------------------------------------------------------------ lookups the checks share

    def loader_site(self, loader) -> str | None:
        """file:line where `loader` was created, when it was created while watching."""
        info = self.loaders.get(id(loader)) if loader is not None else None
        return info.site if info is not None else None

    def live_loaders(self) -> list:
        """The DataLoaders created while watching (or passed to watch()) that still exist, in creation order."""
        return [loader for loader in (info.ref() for info in self.loaders.values() if info.ref is not None)
                if loader is not None]

    def live_optimizers(self) -> list:
        return [o for o in (info.optimizer for info in self.optimizers.values()) if o is not None]

    def optimizer_info(self, opt) -> OptimizerInfo | None:
        info = self.optimizers.get(id(opt))
        return info if info is not None and info.optimizer is opt else None

    def schedulers_of(self, opt_id: int) -> list:
        """The schedulers created for the optimizer with this id (alive or not)."""
        return [s for s in self.schedulers if s.optimizer_id == opt_id]

    @staticmethod
    def params_of(opt) -> list:
        return [p for group in opt.param_groups for p in group["params"]]

    def trainable_ids(self) -> frozenset:
        """ids of every parameter some optimizer holds (any optimizer created, stepping or not)."""
        key = (self._event, len(self.optimizers))
        if self._trainable_cache[0] != key:
            ids = frozenset(id(p) for opt in self.live_optimizers() for p in self.params_of(opt))
            self._trainable_cache = (key, ids)
        return self._trainable_cache[1]

    def param_name(self, p) -> str:
        return self.param_names.get(id(p), f"<{tuple(p.shape)} tensor>")

    def module_name(self, module) -> str:
        name = self.module_names.get(id(module))
        return name if name is not None else type(module).__name__

    def where(self, opt=None) -> str | None:
        """The creation site of `opt`, else of the primary optimizer."""
        info = self.optimizer_info(opt) if opt is not None else self.primary_info()
        return info.site if info is not None else None

    def primary_info(self) -> OptimizerInfo | None:
        info = self.optimizers.get(self._primary) if self._primary is not None else None
        if info is None and self.optimizers:
            info = next(iter(self.optimizers.values()))
        return info

    def watches(self, module) -> bool:
        """Whether `module` is a watched model or one of its modules: its id is named and it is that very
        module (a module built after another was freed may take the freed one's id)."""
        if id(module) not in self.module_names:
            return False
        try:
            return module in self.members
        except TypeError:
            return True

    def is_model(self, module) -> bool:
        """Whether `module` is a watched model itself, not one of its submodules (its input is the run's data)."""
        return self.module_root.get(id(module)) == id(module)

    def primary_lr(self) -> float | None:
        """The largest learning rate of the primary optimizer's groups (as of its last refresh)."""
        info = self.primary_info()
        return max(info.lrs) if info is not None and info.lrs else None

    def grad_norm(self, opt) -> float | None:
        """The total 2-norm of the gradients of `opt`'s parameters now (None: none has a gradient),
        computed once per event however many checks ask."""
        key = (self._event, id(opt))
        cached = self._grad_cache.get(key, self)
        if cached is not self:
            return cached
        if next(iter(self._grad_cache), (self._event,))[0] != self._event:
            self._grad_cache.clear()
        grads = [p.grad for p in self.params_of(opt) if p.grad is not None]
        value = grad_norm_of(grads) if grads else None
        self._grad_cache[key] = value
        return value

    # ------------------------------------------------------------ events from the hooks

    def on_step_pre(self, opt) -> OptimizerInfo | None:
        if self.stopped:
            return None
        if self.in_pass:
            self.resume("an optimizer step")
        info = self.optimizer_info(opt) or self.add_optimizer(opt)
        if self._primary is None or self._primary_gone():
            self._primary = id(opt)  # the first optimizer to step, or the next one once it is gone (rebuilt)
        if self._handlers["on_any_step_pre"]:
            self.dispatch("on_any_step_pre", opt)
        if self.sampled:
            info.refresh()
            for sched in self.schedulers:
                if sched.optimizer_id == id(opt):
                    sched.steps()
            self._event += 1
            self.dispatch("on_step_pre", opt)
        return info

    def _primary_gone(self) -> bool:
        info = self.optimizers.get(self._primary) if self._primary is not None else None
        return info is not None and info.optimizer is None

    def on_step_post(self, opt) -> None:
        if self.stopped:  # the user's code caught StopWatching and went on: stop it again
            if self.stop_run and id(opt) == self._primary:
                raise StopWatching()
            return
        info = self.optimizer_info(opt)
        if info is not None:
            info.steps += 1
        if self.sampled:
            self._event += 1
            self.dispatch("on_step_post", opt)
        if id(opt) != self._primary:
            return
        self.step += 1
        self.run_steps += self._epoch_length() if self.fast_forwarding else 1
        self.depth = 0
        state = self.pass_state
        if state is not None and state.resumed:
            self.sampled_steps += 1   # every step after the pass is checked
            if state.fast_forward:
                state.fast_forward_steps += 1
                if state.fast_forward_steps >= FAST_FORWARD_STEPS:
                    self.stop_fast_forward(f"the limit of {FAST_FORWARD_STEPS} steps")
                return
            state.resumed_steps += 1
            if state.resumed_steps >= RESUMED_STEPS:
                if self.fast_forward:
                    state.fast_forward = True
                else:
                    self.stop(state.ended_by or "the training after the evaluation")
            return
        if self.max_steps is not None and self.step >= self.max_steps:
            if self.evaluation_pass and self._last_batch[0] is not None:
                self.end_epoch_early()
                return
            if self.evaluation_pass and self.stop_run:
                self.pass_skipped = "no DataLoader fed the steps"
            self.end()
            self.stopped = True
            if self.stop_run:
                raise StopWatching()
            # watch(steps=N): stop watching, keep running. The step hooks stay (inert) until the
            # report: torch is iterating over them right now, so removing them here would break it.
            if self.instrumentation is not None:
                self.instrumentation.uninstall(keep_step_hooks=True)
            for handle in self._model_hooks:
                handle.remove()
            self._model_hooks = []
            return
        sampled = self.is_sampled(self.step)
        if sampled:
            self.sampled_steps += 1
        if sampled != self.sampled:
            self.sampled = sampled
            if self.instrumentation is not None:
                self.instrumentation.forward_hooks(sampled)

    # ------------------------------------------------------------ the evaluation pass after --steps

    def end_epoch_early(self) -> None:
        """--steps reached in a run fed by a DataLoader: the training iterator's next batch ends its
        epoch instead, so the script goes on to what it does after an epoch (its evaluation, its
        per-epoch scheduler step) and the checks see that too, on every call. The pass ends at the
        next backward or optimizer step, at the first batch of the training loader's next epoch
        (drawn with grad on; the checks see it), or after EVALUATION_PASS_CALLS batches or model
        calls (see resume)."""
        loader, serial = self._last_batch
        self.pass_state = EvaluationPass(loader=loader, serial=serial)
        if not self.sampled:
            self.sampled = True
            if self.instrumentation is not None:
                self.instrumentation.forward_hooks(True)

    def last_batch_loader(self):
        """The DataLoader that gave the last batch before now (outside the evaluation pass), if alive."""
        ref = self._last_batch[0]
        return ref() if ref is not None else None

    @property
    def in_pass(self) -> bool:
        """In the evaluation pass after --steps (training has not resumed yet)."""
        return self.pass_state is not None and not self.pass_state.resumed

    def resume(self, reason: str) -> None:
        """Training resumed (`reason`) after the evaluation pass. When the pass ran the model, the
        next RESUMED_STEPS optimizer steps are watched, every one sampled, before the stop (see
        on_step_post): that is where a model left in eval mode by its evaluation shows. A pass that
        ran no model call has nothing to show after it: the rest of the script runs in brief at
        once, or, with that off, the stop comes now."""
        state = self.pass_state
        if state is None or not state.model_calls or RESUMED_STEPS < 1:
            if state is None or not self.fast_forward:
                self.stop(reason)
                return
            state.fast_forward = True   # nothing to show in the steps after the pass: on to the rest
        state.ended_by, state.resumed = reason, True   # sampling stays on, as end_epoch_early set it

    @property
    def fast_forwarding(self) -> bool:
        return self.pass_state is not None and self.pass_state.fast_forward

    def _fast_forward_cuts(self, loader, given: int) -> bool:
        """In the brief run: does this iterator of `loader`, which has given `given` batches, end
        here? The training loader's epochs give one batch each, the other loaders' passes
        FAST_FORWARD_BATCHES."""
        state = self.pass_state
        assert state is not None
        training = loader is not None and state.loader is not None and state.loader() is loader
        return given >= (1 if training else FAST_FORWARD_BATCHES)

    def _epoch_length(self) -> int:
        """The steps one epoch of the training loader takes (1 when unknown): what a step of the brief
        run stands for, since each of its epochs gives one batch."""
        state = self.pass_state
        loader = state.loader() if state is not None and state.loader is not None else None
        try:
            return max(1, len(loader)) if loader is not None else 1
        except TypeError:   # an iterable dataset has no length
            return 1

    def stop_fast_forward(self, reason: str) -> None:
        assert self.pass_state is not None
        self.pass_state.fast_forward_end = reason
        self.stop(reason)

    def stop(self, reason: str) -> None:
        """End the evaluation pass: record what ended it, take the last measurements, raise StopWatching."""
        if self.pass_state is not None and self.pass_state.ended_by is None:
            self.pass_state.ended_by = reason
        self.end()
        self.stopped = True
        raise StopWatching()

    def cuts(self, serial: int | None, loader=None, given: int = 0) -> bool:
        """Does this DataLoader iterator (`serial`, of `loader`, `given` batches so far) end here? In
        the evaluation pass, the training iterator does; in the brief run after it, every iterator
        once it has given its share (_fast_forward_cuts)."""
        if self.stopped:
            return False
        if self.fast_forwarding:
            return self._fast_forward_cuts(loader, given)
        state = self.pass_state
        return state is not None and not state.resumed and serial is not None and serial == state.serial

    def _count_pass_call(self, attribute: str, limit: int = EVALUATION_PASS_CALLS, what: str | None = None) -> None:
        """Count one more batch or model call of the pass (or of the brief run after it) in
        `attribute`; the one past `limit` stops the run."""
        state = self.pass_state
        assert state is not None
        if getattr(state, attribute) >= limit:  # this one would be past the limit
            reason = f"the limit of {limit} {what or attribute.replace('_', ' ')}"
            (self.stop_fast_forward if state.fast_forward else self.stop)(reason)
        setattr(state, attribute, getattr(state, attribute) + 1)

    def before_backward(self, tensors) -> None:
        if self.in_pass:
            self.resume("a backward")
        self.backward_calls += 1
        if self._handlers["on_any_backward"]:
            self.dispatch("on_any_backward", tensors)
        if self.sampled:
            self._event += 1
            self._norms_before = {id(opt): self.grad_norm(opt) for opt in self.live_optimizers()}
            self.dispatch("on_before_backward", tensors)

    def grad_norm_before_backward(self, opt) -> float | None:
        """The gradient norm of `opt` just before the current sampled backward() (None: no gradient)."""
        return self._norms_before.get(id(opt))

    def backward_wrote(self, opt) -> bool:
        """In on_after_backward: whether that backward() changed the gradient of `opt`'s parameters
        (shared, so that checks asking which network a backward reached compute the norms once)."""
        before, now = self._norms_before.get(id(opt)), self.grad_norm(opt)
        if not now:
            return False
        return before is None or abs(now - before) > 1e-6 * max(now, before)

    def after_backward(self, tensors) -> None:
        if self._handlers["on_any_after_backward"]:
            self.dispatch("on_any_after_backward", tensors)
        if self.sampled:
            self._event += 1
            self.dispatch("on_after_backward", tensors)

    def loss_call(self, kind: str, bound: dict, evaluation: bool = False) -> LossCall:
        module = self.current_loss_module
        site = self.module_sites.get(module) if module is not None else None
        if site is None:
            site = user_site(depth=3)
        key = (kind, site)
        info = self.losses.get(key)
        if info is None:
            info = LossInfo(kind=kind, site=site, module=type(module).__name__ if module is not None else None)
            if len(self.losses) < MAX_LISTED:
                self.losses[key] = info
        info.calls += 1
        if "log_probs" in bound:  # ctc_loss names its input and targets so
            bound["input"], bound["target"] = bound.pop("log_probs"), bound.pop("targets", None)
        call = LossCall(kind=kind, input=bound.pop("input", None), target=bound.pop("target", None),
                        options=bound, info=info, grad_enabled=torch.is_grad_enabled(), first=info.calls == 1,
                        evaluation=evaluation)
        self.dispatch("on_loss_input", call, only=self._evaluation_checks if evaluation else None)
        return call

    def loss_returned(self, call: LossCall, output) -> None:
        call.output = output
        self.dispatch("on_loss", call, only=self._evaluation_checks if call.evaluation else None)
        call.input = call.target = call.output = None  # keep no tensor alive
        self.last_loss = call

    def take_evaluation_loss(self) -> bool:
        """Whether to watch a loss call on a step that is not sampled: grad is off (an evaluation loop
        runs between two optimizer steps, often all of it on one unsampled step), a check watches such
        calls (`watches_evaluation`), and fewer than EVALUATION_LOSSES have been taken this run."""
        if self.evaluation_losses_left <= 0 or not self._evaluation_checks or torch.is_grad_enabled():
            return False
        self.evaluation_losses_left -= 1
        return True

    def clip_call(self, parameters, max_norm, norm, site: str | None, kind: str = "norm") -> None:
        if self._handlers["on_clip"]:
            self._event += 1
            self.dispatch("on_clip", ClipCall(parameters=parameters, max_norm=max_norm, norm=norm, site=site, kind=kind))

    @property
    def spread_watched(self) -> bool:
        return bool(self._handlers["on_spread"])

    def spread_call(self, name: str, source, result) -> None:
        """A std/var that reduced one element per output value: NaN where the correction is 1."""
        if result.is_floating_point() and bool(result.detach().isnan().any()):
            self.dispatch("on_spread", SpreadCall(name=name, input_shape=tuple(source.shape),
                                                  output_shape=tuple(result.shape), grad_enabled=torch.is_grad_enabled(),
                                                  requires_grad=source.requires_grad, site=user_site(depth=4)))

    @property
    def log_watched(self) -> bool:
        return bool(self._handlers["on_log"])

    def log_call(self, name: str, source, result) -> None:
        self.dispatch("on_log", name, source, result)

    @property
    def log_prob_watched(self) -> bool:
        return bool(self._handlers["on_log_prob"])

    def log_prob_call(self, distribution, value, result, site: str | None) -> None:
        self.dispatch("on_log_prob", distribution, value, result, site)

    @property
    def bernoulli_watched(self) -> bool:
        return bool(self._handlers["on_bernoulli"])

    def bernoulli_call(self, probability) -> None:
        self.dispatch("on_bernoulli", probability)

    @property
    def no_grad_watched(self) -> bool:
        return bool(self._handlers["on_no_grad_block"])

    def no_grad_block(self, frame, entering: bool) -> None:
        self.dispatch("on_no_grad_block", frame, entering)

    @property
    def uniform_mask_watched(self) -> bool:
        return bool(self._handlers["on_uniform_mask"])

    def uniform_mask_call(self, site: str) -> None:
        self.dispatch("on_uniform_mask", site)

    @property
    def random_init_watched(self) -> bool:
        return bool(self._handlers["on_random_init"])

    def random_init_call(self, tensor, name: str, site: str) -> None:
        self.dispatch("on_random_init", tensor, name, site)

    @property
    def reshape_watched(self) -> bool:
        return bool(self._handlers["on_reshape"])

    def reshape_call(self, name: str, source_shape, result_shape) -> None:
        self.dispatch("on_reshape", name, tuple(source_shape), tuple(result_shape))

    @property
    def autograd_grad_watched(self) -> bool:
        return bool(self._handlers["on_autograd_grad"])

    def autograd_grad_call(self, outputs, result, site: str | None) -> None:
        outputs = (outputs,) if isinstance(outputs, torch.Tensor) else tuple(outputs or ())
        self._event += 1
        self.dispatch("on_autograd_grad", outputs, tuple(result), site)

    @property
    def plain_autograd_grad_watched(self) -> bool:
        return bool(self._handlers["on_plain_autograd_grad"])

    def plain_autograd_grad_call(self, outputs, result, site: str | None) -> None:
        outputs = (outputs,) if isinstance(outputs, torch.Tensor) else tuple(outputs or ())
        self.dispatch("on_plain_autograd_grad", outputs, tuple(result), site)

    def state_dict_loaded(self, module, strict: bool, result, site: str | None) -> None:
        if self._handlers["on_state_dict_loaded"]:
            self.dispatch("on_state_dict_loaded", module, strict, result, site)

    def optimizer_state_loaded(self, opt, site: str | None) -> None:
        if self._handlers["on_optimizer_state_loaded"]:
            self.dispatch("on_optimizer_state_loaded", opt, site)

    def checkpoint_call(self, function, site: str | None) -> None:
        if self._handlers["on_checkpoint"]:
            self.dispatch("on_checkpoint", function, site)

    def dropout_call(self, p: float, training_given: bool = True, kind: str = "F.dropout") -> None:
        if self._handlers["on_dropout"]:
            self.dispatch("on_dropout", p, training_given, kind)

    def module_forward(self, module, output) -> None:
        self.dispatch("on_module_forward", module, output, torch.is_grad_enabled())

    def module_input(self, module, args) -> None:
        if self._handlers["on_module_input"]:
            self.dispatch("on_module_input", module, args)

    def batch(self, loader, batch, serial: int | None = None) -> None:
        self.batches += 1
        state = self.pass_state if self.in_pass else None
        # the training loader's next epoch has begun: training resumes (its first batch is shown to the checks)
        resumed = state is not None and loader is not None and state.loader() is loader and torch.is_grad_enabled()
        if state is not None and not resumed:
            self._count_pass_call("batches")
        elif state is None and loader is not None:
            self._last_batch = (weakref.ref(loader), serial)
        info = self.loaders.get(id(loader))
        if info is not None:
            info.batches += 1
        if self._handlers["on_any_batch"] and loader is not None:
            self.dispatch("on_any_batch", loader, batch, serial)
        if resumed:
            self.resume("the next epoch")
        if self.sampled:
            self.dispatch("on_batch", loader, batch)

    # ------------------------------------------------------------ the report

    def end(self) -> None:
        """The run is over (or --steps reached): checks take their last measurements, once, while
        the user's objects may still be alive."""
        if not self._ended:
            self._ended = True
            for opt_info in self.optimizers.values():
                opt_info.refresh()
            for sched in self.schedulers:
                sched.steps()
            self.dispatch("on_end")

    def findings(self) -> list:
        from kb_tools.watch.report import sort_findings
        found = []
        for check in list(self.checks):
            try:
                found.extend(f.to_dict() for f in check.findings())
            except Exception as exc:  # noqa: BLE001
                self._disable(check, "findings", exc)
        return sort_findings(found)

    def facts(self) -> dict:
        """What the run was: steps, sampling, and what was found with where it was created."""
        return {
            "rank": self.rank,
            "steps": self.step,
            "sampled_steps": self.sampled_steps,
            "every": self.every,
            "warmup": self.warmup,
            "backward_calls": self.backward_calls,
            "batches": self.batches,
            "models": [m.to_dict() for m in self.models],
            "optimizers": [o.to_dict() for o in self.optimizers.values()],
            "schedulers": [s.to_dict() for s in self.schedulers],
            "losses": [loss.to_dict() for loss in self.losses.values()],
            "loaders": [loader.to_dict() for loader in self.loaders.values()],
            "internal_errors": list(self.internal_errors),
            "evaluation_pass": self.pass_state.to_dict() if self.pass_state is not None else None,
            "evaluation_pass_skipped": self.pass_skipped,
            "shared": self._shared(),
        }

    def _shared(self) -> dict:
        out = {}
        for check in self.checks:
            try:
                data = check.shared()
            except Exception as exc:  # noqa: BLE001 - a check's bug must never break the report
                self.internal_errors.append(f"{check.code} shared: {type(exc).__name__}: {exc}")
                continue
            if data is not None:
                out[check.code] = data
        return out


def finite(value: float) -> bool:
    return value is not None and math.isfinite(value)
