"""KBW097: a torch.no_grad() block inside the training step takes in the model's output, so what
is computed from it (a perceptual or feature loss, a speaker or style term) carries no gradient.

Criterion: on at least MIN_STEPS sampled steps, after a watched model ran with grad enabled and before
the next backward(), a no_grad block of the user's code entered while grad was enabled (`with
torch.no_grad():`; a decorated function is not a block of the step) either
- calls a module holding parameters (a frozen feature network, a discriminator) with a floating
  tensor that carries a graph reaching the parameters of a live optimizer: `with torch.no_grad():
  feats = vgg(fake)` where fake is the generator's output; or
- sits in the forward() of a module and rebinds one of that forward's local names, which held such
  a tensor when the block began, to a floating tensor without a graph: `def forward(self, x): with
  torch.no_grad(): x = self.spectrogram(x)` called on the model's output.
The first block site (file:line) seen on MIN_STEPS steps is reported. Targets computed under no_grad
from data (a teacher, a momentum encoder, an EMA model: their inputs carry no graph), work after
backward() (logging, metrics), modules without parameters (metrics) and leaf tensors (parameters
updated by hand, an adversarial perturbation) do not match. A block that only logs the model's output
through a network (an FID estimate inside the training step) matches too: harmless, but rare there.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, plural
from kb_tools.watch.checks.tensors import reaches_trained
from kb_tools.watch.sites import show_path

MIN_STEPS = 3
MAX_OPEN = 4        # nested blocks followed at once
MAX_LOCALS = 32     # graph-carrying locals remembered per block
MAX_SITES = 16
MAX_WALKS = 64      # graph walks (which parameters a tensor reaches) per run
MAX_LEAVES = 4096


def _graph_tensor(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.grad_fn is not None


class _Block:
    __slots__ = ("frame", "site", "graph_locals", "forward_of")

    def __init__(self, frame, site, graph_locals, forward_of):
        self.frame, self.site, self.graph_locals, self.forward_of = frame, site, graph_locals, forward_of


class NoGradCutsTrainingGraph(Check):
    __doc__ = __doc__
    code = "KBW097"
    name = "no-grad-cuts-training-graph"
    entry = "loss-detached-from-graph"
    title = "a no_grad block in the training step takes in the model's output: what it computes carries no gradient"
    confidence = 0.7

    def __init__(self, session):
        super().__init__(session)
        self.open: list = []          # _Block, innermost last (frames and tensors held only while open)
        self.in_step = False          # a watched model ran with grad since the last backward()
        self.walks = 0
        self.sites: dict = {}         # site -> [steps seen, last step, first step, how, what, model]

    # ------------------------------------------------------------------ events

    def on_root_forward(self, model, grad_enabled):
        if grad_enabled:
            self.in_step = True

    def on_any_backward(self, tensors):
        self.in_step = False

    def on_any_step_pre(self, optimizer):
        self.open = []  # a block is part of one step: one whose end was not seen is over

    def on_no_grad_block(self, frame, entering):
        if entering:
            if len(self.open) >= MAX_OPEN or not self.in_step:
                self.open.append(None)  # keeps enter and exit paired
                return
            code = frame.f_code
            owner = frame.f_locals.get("self")
            forward_of = type(owner).__name__ if code.co_name == "forward" and isinstance(owner, torch.nn.Module) else None
            graph_locals = {}
            if forward_of is not None:
                for name, value in list(frame.f_locals.items())[:4 * MAX_LOCALS]:
                    if _graph_tensor(value) and len(graph_locals) < MAX_LOCALS:
                        graph_locals[name] = value
            site = f"{show_path(code.co_filename)}:{frame.f_lineno}"
            self.open.append(_Block(frame, site, graph_locals, forward_of))
            return
        if not self.open:
            return
        block = self.open.pop()
        if block is None or block.frame is not frame:
            return
        for name, before in block.graph_locals.items():
            after = frame.f_locals.get(name)
            if isinstance(after, torch.Tensor) and after is not before and after.is_floating_point() \
                    and not after.requires_grad and self._trains(before):
                self._seen(block.site, "rebinds", name, block.forward_of)
                break
        block.frame = block.graph_locals = None

    def on_module_input(self, module, args):
        if not self.open or torch.is_grad_enabled():
            return
        block = self.open[-1]
        if block is None or next(module.parameters(), None) is None:
            return
        for value in args[:4]:
            if _graph_tensor(value) and self._trains(value):
                self._seen(block.site, "feeds", self.session.module_name(module),
                           block.forward_of)
                return

    # ------------------------------------------------------------------ helpers

    def _trains(self, tensor) -> bool:
        """Does this tensor's graph reach a parameter of a live optimizer (the model's output, not a
        perturbation or a hand-updated leaf)?"""
        if self.walks >= MAX_WALKS:
            return False
        self.walks += 1
        return reaches_trained(self.session, tensor, MAX_LEAVES)

    def _seen(self, site: str, how: str, what: str, forward_of) -> None:
        st = self.sites.get(site)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[site] = [0, None, self.session.step, how, what, forward_of]
        if st[1] != self.session.step:
            st[0] += 1
            st[1] = self.session.step

    def on_end(self):
        self.open = []

    def findings(self) -> list:
        out = []
        for site, (steps, _, first, how, what, forward_of) in self.sites.items():
            if steps < MIN_STEPS:
                continue
            inside = f" inside {forward_of}.forward" if forward_of else ""
            if how == "feeds":
                did = (f"passes a tensor that carries the trained parameters' graph to {what}, so {what}'s output "
                       f"and everything computed from it carry no gradient")
            else:
                did = (f"replaces `{what}`, which carried the trained parameters' graph when the block began, by a "
                       f"value without one, so everything computed from it carries no gradient")
            message = (f"the torch.no_grad() block at {site}{inside}, entered with grad enabled before backward() "
                       f"on {plural(steps, 'sampled step')} from step {first}, {did}: a loss term built on it is "
                       f"computed and logged but trains nothing; keep no_grad for the target branch only (the real "
                       f"sample's features) and run the model's output through with grad enabled (the frozen "
                       f"network's parameters can stay requires_grad=False)")
            evidence = {"block": site, "how": how, "tensor" if how == "rebinds" else "module": what,
                        "forward_of": forward_of, "sampled_steps": steps, "first_step": first}
            out.append(self.finding(message, where=site, step=first, evidence=evidence))
        return out
