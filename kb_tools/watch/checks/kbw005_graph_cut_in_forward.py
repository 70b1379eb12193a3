"""KBW005: a layer runs in the forward pass but no gradient ever reaches it: the graph is cut after it.

Criterion: on at least 3 sampled steps, a parameter that requires grad and belongs to an
optimizer sits in a module whose forward ran with grad enabled during that step, and its .grad
is None at step() while other parameters of the same optimizer have gradients: something
between that module and the loss (.detach(), .data, .item(), a numpy round trip, a no_grad
block) cut the graph, or its output never reaches the loss. A parameter its module no longer
holds (replaced by a new nn.Parameter: KBW070's case) is left out.

Second form, the same with the module run only under no_grad in those steps (never with grad
enabled in the step, so not an evaluation pass beside training): `with torch.no_grad():
feats = model.encoder(x)` in the training step while the encoder's parameters are in the optimizer
that steps (not in a step with a reentrant torch.utils.checkpoint call, KBW056's case). Parameters
kept out of every optimizer (a target network, a momentum encoder) are not read by either form.
A module frozen only by running it under no_grad, its parameters left in the optimizer, matches
too: harmless to the update, so this form is reported with lower confidence.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, names, plural

MIN_STEPS = 3
NO_GRAD_CONFIDENCE = 0.5


class GraphCutInForward(Check):
    __doc__ = __doc__
    code = "KBW005"
    name = "graph-cut-in-forward"
    entry = "loss-detached-from-graph"
    title = "layers whose forward runs with grad enabled but whose parameters never get a gradient"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.ran: dict[int, object] = {}  # modules with own parameters that ran with grad, this step
        self.ran_without_grad: dict[int, object] = {}  # ... that ran under no_grad, this step
        self.ran_step = None
        self.checkpoint_step = None       # the latest sampled step with a reentrant checkpoint call
        self.cut: dict[int, list] = {}  # id(param) -> [name, sampled steps without gradient, first step]
        self.got: set[int] = set()      # parameters that did get a gradient at some sampled step

    def on_module_forward(self, module, output, grad_enabled):
        if module._parameters:
            if self.ran_step != self.session.step:
                self.ran, self.ran_without_grad, self.ran_step = {}, {}, self.session.step
            (self.ran if grad_enabled else self.ran_without_grad)[id(module)] = module

    def on_checkpoint(self, function, site):
        self.checkpoint_step = self.session.step

    def on_step_pre(self, optimizer):
        s = self.session
        if self.ran_step != s.step:
            return
        params = [p for p in s.params_of(optimizer) if p.requires_grad]
        missing = [p for p in params if p.grad is None]
        if not missing or len(missing) == len(params):
            return  # everything has a gradient, or nothing does (another check's case)
        for p in params:
            if p.grad is not None:
                self.got.add(id(p))
        for p in missing:
            key = id(p)
            owner_id = s.param_owner.get(key)
            owner = self.ran.get(owner_id)
            no_grad = owner is None
            if no_grad and self.checkpoint_step != s.step:
                owner = self.ran_without_grad.get(owner_id)
            if key in self.got or owner is None or not any(q is p for q in owner._parameters.values()):
                continue
            entry = self.cut.setdefault(key, [s.param_name(p), 0, s.step, id(optimizer), no_grad])
            entry[1] += 1

    def findings(self) -> list:
        cut = [v for k, v in self.cut.items() if v[1] >= MIN_STEPS and k not in self.got]
        if not cut:
            return []
        site = self.session.where()
        modules = list(dict.fromkeys(name.rsplit(".", 1)[0] if "." in name else name for name, *_ in cut))
        if all(v[4] for v in cut):
            message = (f"{plural(len(cut), 'parameter')} ({names([v[0] for v in cut])}) of "
                       f"{plural(len(modules), 'module')} in the optimizer ran only under torch.no_grad() in the "
                       f"training steps and never got a gradient on {min(v[1] for v in cut)} sampled steps, while "
                       f"the rest of the model did ({created_at('optimizer', site)}): {names(modules, 3)} is not "
                       f"trained; run it with grad enabled, or leave its parameters out of the optimizer if it is "
                       f"meant to stay frozen")
            confidence = NO_GRAD_CONFIDENCE
        else:
            confidence = self.confidence
            message = (f"{plural(len(cut), 'parameter')} ({names([v[0] for v in cut])}) of "
                       f"{plural(len(modules), 'module')} that ran in the forward pass with grad enabled never got "
                       f"a gradient on {min(v[1] for v in cut)} sampled steps, while the rest of the model did "
                       f"({created_at('optimizer', site)}): the graph is cut between {names(modules, 3)} and the "
                       f"loss (.detach(), .data, .item(), numpy, no_grad), or its output never reaches the loss")
        evidence = {"parameters": [v[0] for v in cut][:50], "modules": modules[:20],
                    "sampled_steps_without_gradient": min(v[1] for v in cut), "first_step": min(v[2] for v in cut)}
        return [self.finding(message, evidence=evidence, where=site, step=min(v[2] for v in cut), confidence=confidence)]
