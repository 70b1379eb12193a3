"""The run-time checks of `kb watch`: one module per check, found here by name.

Adding a check is one new file `kbwNNN_<name>.py` in this folder holding one subclass of
`Check` (plus a bug/fixed pair of scripts under tests/watch/cases/<entry>/): the registry
imports every module whose name starts with `kbw`, so nothing else is edited.

A check declares `code` (KBW and three digits, unique), `name`, `entry` (an existing KB entry
id: a test loads the KB and checks it), `title` (one line: what it measures), `confidence`,
and states its numeric criterion in its docstring. It overrides the callbacks it needs (see
`Check`); the session calls only those. It keeps running counters or fixed-size state, never a
list that grows with the step count, never a tensor, and reports through `findings()`, which
may be called more than once (the in-code API reports on demand) and so must not change state.
"""
from __future__ import annotations

import importlib
import pkgutil
import re

from kb_tools.core.util import plural  # noqa: F401  (the checks import it from here)
from kb_tools.watch.report import Finding

# The callbacks a check may implement. "sampled" ones run only on sampled steps (the first
# `warmup` steps, then every `every`-th); the others run on every call and must be cheap.
EVENTS = {
    "on_root_forward": "every call of a watched model (model, grad_enabled): must cost microseconds",
    "on_root_input": "every call of a watched model is about to run (model, positional args, grad_enabled): must "
                     "cost microseconds unless the check decides to look",
    "on_root_output": "every call of a watched model returned (model, output, grad_enabled): must cost microseconds",
    "on_module_forward": "sampled: every module's forward (module, output, grad_enabled)",
    "on_module_input": "sampled: a module's forward is about to run (module, args); dispatched only when a check has it",
    "on_loss_input": "sampled: a loss function is about to run (LossCall without output)",
    "on_loss": "sampled: a loss function returned (LossCall with output)",
    "on_any_backward": "every call: backward() is about to run (tensors), on any step; must be cheap",
    "on_any_after_backward": "every call: backward() returned (tensors), on any step; must be cheap",
    "on_before_backward": "sampled: backward() is about to run (tensors)",
    "on_after_backward": "sampled: backward() returned (tensors)",
    "on_any_step_pre": "every call: optimizer.step() is about to run (optimizer), on any step; must be cheap",
    "on_step_pre": "sampled: optimizer.step() is about to run (optimizer)",
    "on_step_post": "sampled: optimizer.step() returned (optimizer)",
    "on_batch": "sampled: a DataLoader yielded a batch (loader, batch)",
    "on_any_batch": "every call: a DataLoader iterator yielded a batch (loader, batch, the iterator's serial number); "
                    "must be cheap",
    "on_clip": "sampled: clip_grad_norm_ returned (ClipCall: parameters, max_norm, the norm it returned, site)",
    "on_dropout": "every call: a functional dropout (nn.Dropout's too) drops units: training=True, p > 0 (p, "
                  "whether the caller passed training or left it at its default, and the kind: 'F.dropout', or "
                  "ATTENTION_DROPOUT for scaled_dot_product_attention's dropout_p, which has no training flag); "
                  "must be cheap",
    "on_bernoulli": "every call: torch.bernoulli or Tensor.bernoulli / bernoulli_ drew a 0/1 mask (its probability: a "
                    "number, or the tensor of probabilities); dispatched only when a check has it",
    "on_no_grad_block": "sampled: a torch.no_grad() block of the user's code, entered while grad was enabled, starts "
                        "or ends (the caller's frame, whether it starts); dispatched only when a check has it",
    "on_uniform_mask": "every call: torch.rand / rand_like or Tensor.uniform_ drew at least two values on a line of the "
                       "user's code that thresholds them into a 0/1 mask (that file:line); dispatched only when a "
                       "check has it",
    "on_random_init": "every call: a torch.nn.init random initialiser (uniform_, normal_, xavier_*, kaiming_*, ...) "
                      "filled a tensor that is not an nn.Parameter, called from the user's code (the tensor, the "
                      "initialiser's name, that file:line); dispatched only when a check has it",
    "on_spread": "every call: a std/var whose reduction held one element per output value returned NaN "
                 "(name, input shape, output shape, grad_enabled, site)",
    "on_log": "sampled: torch.log, log1p, log_softmax or logsumexp (or the Tensor method) returned a result that "
              "requires grad (name, input, output); dispatched only when a check has it",
    "on_log_prob": "sampled: a torch.distributions log_prob returned (the distribution, the value scored, the result, "
                   "site); dispatched only when a check has it",
    "on_reshape": "sampled: Tensor.view / Tensor.reshape / torch.reshape returned a result of another shape "
                  "(name, input shape, output shape); dispatched only when a check has it",
    "on_autograd_grad": "sampled: torch.autograd.grad with create_graph=True returned (outputs, its results, site); "
                        "dispatched only when a check has it",
    "on_plain_autograd_grad": "sampled: torch.autograd.grad without create_graph, called with grad enabled, returned "
                              "(outputs, its results, site); dispatched only when a check has it",
    "on_checkpoint": "sampled: a reentrant torch.utils.checkpoint call, grad enabled, no input requiring grad "
                     "(function, site)",
    "on_tensor_copy": "sampled: torch.tensor or torch.as_tensor, grad enabled, copied data holding tensors that "
                      "require grad, or torch.argmax / argmin (function or method) took indices from a tensor with "
                      "a graph (name, those tensors, the copy or the indices, site); the functions are wrapped only "
                      "when a check has it",
    "on_state_dict_loaded": "every call: Module.load_state_dict returned (module, strict, its missing/unexpected "
                            "keys report, site)",
    "on_optimizer_state_loaded": "every call: Optimizer.load_state_dict returned (optimizer, site)",
    "on_end": "once: the run ended or --steps was reached (the user's objects may already be gone)",
}
CODE_FORM = re.compile(r"^KBW\d{3}$")
ATTENTION_DROPOUT = "F.scaled_dot_product_attention"  # on_dropout's kind for an attention kernel's dropout_p


class Check:
    """Base of every check. Subclasses set the class attributes and override callbacks."""

    code = ""        # KBW001
    name = ""        # kebab-case name of what it detects
    entry = ""       # the KB entry that explains the cause
    also: tuple = ()  # other entries a finding of this check may name (one criterion per cause)
    title = ""       # one line: what it measures
    confidence = 0.5  # how sure a finding of this check is, 0..1 (findings are sorted by it)
    watches_evaluation = False  # also sent the loss calls under no_grad of unsampled steps (LossCall.evaluation)

    def __init__(self, session):
        self.session = session

    # callbacks: the defaults do nothing, and the session skips checks that keep them
    def on_root_forward(self, model, grad_enabled): pass
    def on_root_input(self, model, args, grad_enabled): pass
    def on_root_output(self, model, output, grad_enabled): pass
    def on_module_forward(self, module, output, grad_enabled): pass
    def on_module_input(self, module, args): pass
    def on_loss_input(self, call): pass
    def on_loss(self, call): pass
    def on_any_backward(self, tensors): pass
    def on_any_after_backward(self, tensors): pass
    def on_before_backward(self, tensors): pass
    def on_after_backward(self, tensors): pass
    def on_any_step_pre(self, optimizer): pass
    def on_step_pre(self, optimizer): pass
    def on_step_post(self, optimizer): pass
    def on_batch(self, loader, batch): pass
    def on_any_batch(self, loader, batch, serial): pass
    def on_clip(self, call): pass
    def on_autograd_grad(self, outputs, results, site): pass
    def on_reshape(self, name, source_shape, result_shape): pass
    def on_log_prob(self, distribution, value, result, site): pass
    def on_dropout(self, p, training_given, kind): pass
    def on_bernoulli(self, probability): pass
    def on_uniform_mask(self, site): pass
    def on_random_init(self, tensor, name, site): pass
    def on_no_grad_block(self, frame, entering): pass
    def on_spread(self, call): pass
    def on_log(self, name, source, output): pass
    def on_plain_autograd_grad(self, outputs, results, site): pass
    def on_checkpoint(self, function, site): pass
    def on_tensor_copy(self, name, sources, copy, site): pass
    def on_state_dict_loaded(self, module, strict, result, site): pass
    def on_optimizer_state_loaded(self, optimizer, site): pass
    def on_end(self): pass

    def findings(self) -> list:
        """What this check found so far; called at the report, possibly more than once."""
        return []

    def shared(self) -> dict | None:
        """Plain data for the merge of several ranks' reports (kb_tools/watch/ranks.py), kept in the
        report's `run.shared` under this check's code; None when there is nothing to share."""
        return None

    def finding(self, message: str, *, evidence: dict | None = None, where: str | None = None,
                step: int | None = None, confidence: float | None = None, entry: str | None = None) -> Finding:
        if entry is not None and entry != self.entry and entry not in self.also:
            raise ValueError(f"{self.code}: {entry} is neither its entry nor in its `also`")
        return Finding(code=self.code, entry=entry or self.entry, title=self.title,
                       confidence=self.confidence if confidence is None else confidence,
                       message=message, evidence=evidence or {}, where=where, step=step,
                       rank=self.session.rank)

    @classmethod
    def describe(cls) -> dict:
        doc = (cls.__doc__ or "").strip()
        return {"code": cls.code, "name": cls.name, "entry": cls.entry, "also": list(cls.also), "title": cls.title,
                "confidence": cls.confidence, "criterion": " ".join(doc.split())}


_registry: list | None = None


def all_checks() -> list:
    """Every check class in this package, by code. Raises ValueError on a malformed or duplicate code."""
    global _registry
    if _registry is None:
        found = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
            if not info.name.startswith("kbw"):
                continue
            module = importlib.import_module(f"{__name__}.{info.name}")
            for value in vars(module).values():
                if isinstance(value, type) and issubclass(value, Check) and value is not Check \
                        and value.__module__ == module.__name__:
                    if not CODE_FORM.match(value.code) or not value.entry or not value.name:
                        raise ValueError(f"{module.__name__}.{value.__name__}: a check needs a code KBWnnn, "
                                         f"a name and an entry")
                    if value.code in found:
                        raise ValueError(f"{value.code} is used by {found[value.code].__name__} and "
                                         f"{value.__name__}")
                    found[value.code] = value
        _registry = [found[code] for code in sorted(found)]
    return list(_registry)


def created_at(kind: str, site: str | None) -> str:
    """"optimizer created at train.py:41" (or "... passed to watch() at ...", or just the kind)."""
    if not site:
        return kind
    return f"{kind} {site}" if site.startswith("passed to watch()") else f"{kind} created at {site}"


def loss_where(call) -> str:
    """"loss created at train.py:30" for an nn loss module, "cross_entropy called at train.py:55" for a function."""
    info = call.info if hasattr(call, "info") else call
    if info.module is not None:
        return created_at(f"{info.module}", info.site) if info.site else info.module
    return f"{info.kind} called at {info.site}" if info.site else info.kind


class SiteTally:
    """Per loss site (kind, where, site): the calls compared, the calls that matched and what the first
    match measured; the "on at least N sampled calls and on a share of the calls compared" criterion
    several checks state. Holds at most `limit` sites."""

    def __init__(self, limit: int = 16):
        self.limit = limit
        self.sites: dict = {}  # (kind, where, site) -> [compared, matched, first matching step, details]

    def count(self, call, step: int, matched: bool, details: object = None) -> None:
        key = (call.kind, loss_where(call), call.site)
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= self.limit:
                return
            st = self.sites[key] = [0, 0, None, None]
        st[0] += 1
        if matched:
            st[1] += 1
            if st[2] is None:
                st[2], st[3] = step, details

    def confirmed(self, min_calls: int, share: float):
        """(kind, where, site, compared, matched, first step, details) of each site whose matching
        calls number at least `min_calls` and at least `share` of its compared calls."""
        for (kind, where, site), (compared, matched, step, details) in self.sites.items():
            if matched >= min_calls and matched >= share * compared:
                yield kind, where, site, compared, matched, step, details


def this_step(items: list, step: int, limit: int) -> list:
    """The `(step, ...)` tuples of `items` recorded at `step`, leaving room for one more within `limit`:
    what a loss call of this step compares against (an earlier step's batch is another batch)."""
    return [x for x in items if x[0] == step][-(limit - 1):]


def names(items: list, limit: int = 4) -> str:
    """"a, b, c and 2 more": a short list for a message."""
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"


def overridden(check, event: str) -> bool:
    """Whether `check` implements `event` (the session calls only those)."""
    return getattr(type(check), event) is not getattr(Check, event)
