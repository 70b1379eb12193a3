"""KBW006: the loss or the gradient turns NaN or infinite, and where it started.

Criterion: on a sampled step a loss value, or the total gradient norm at step(), is NaN or
infinite. The finding gives the first such step; whether the gradient was already non-finite
while the loss was still finite (the NaN is born in the backward pass, not the forward); the
first module of the forward pass whose output was non-finite, and whether its own weights
were already non-finite (poisoned by an earlier update); and whether the batch itself was.
When the gradient turned NaN (not inf: a norm of huge but finite gradients overflows to inf,
as an explosion does) under a finite float32/float64 loss and the autograd graph behind that
loss holds a square root, a norm or a power below 1 (derivatives infinite at 0, times 0 in the
chain rule: NaN) and not both a torch.where and a log (a guard such as where(p > 0, p * log(p), 0),
whose untaken branch is differentiated: nan-loss), the finding names nan-grad-at-zero. When the
first non-finite module output is float16 and holds inf while that module's weights and the batch
were finite, it names fp16-overflow.

Between sampled steps the gradient is watched too: on each unsampled step the total gradient
norm is taken, and a NaN under a finite loss dates the NaN to that step. On the CPU the norm is
read at once (tensors.host_grad_norm, the helper the sampled steps use there), and the ops are
read from that step's graph. On an accelerator, to avoid a
synchronisation per step, the norm and the loss's sum stay on the device (for up to MAX_UNREAD
steps) and are read together at the next sampled step, whose graph (the same code) is then the
one read.

A NaN can also be born inside the forward pass, in a gradient it takes itself: forces as the
gradient of an energy, a gradient penalty (torch.autograd.grad with create_graph=True). When
such a call returns NaN from finite outputs before any loss was non-finite, the finding names
that call, and reads the ops behind its outputs as above.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import first_tensor, grad_norm_tensor, host_grad_norm, nodes_from

MAX_OUTPUTS = 4096  # module outputs kept from one forward pass (a bound for long recurrent loops)
MAX_NODES = 50_000  # autograd nodes read behind one loss
# Ops whose derivative is infinite at 0: sqrt, 1/sqrt, norms and distances (PowBackward with an
# exponent below 1 is read from its saved exponent).
MAX_UNREAD = 256  # unsampled steps kept for the next sampled step (--every is rarely above 100)
ROOT_OPS = {"SqrtBackward0", "RsqrtBackward0", "LinalgVectorNormBackward0", "NormBackward0", "NormBackward1",
            "NormBackward2", "NormBackward3", "CdistBackward0", "PdistBackward0", "EuclideanDistBackward"}


LOG_OPS = {"LogBackward0", "Log2Backward0", "Log10Backward0", "XlogyBackward0"}


def _graph_ops(grad_fns) -> tuple:
    """(root-like ops, whether a torch.where guarding a log is there: a where and a log op) in the
    autograd graph behind a loss. Read after the backward pass: the nodes stay while the loss's
    grad_fn is held, their saved tensors are freed, scalars such as a power's exponent are still
    readable."""
    roots, where, log = set(), False, False
    for node in nodes_from(grad_fns if isinstance(grad_fns, list) else [grad_fns], MAX_NODES):
        name = type(node).__name__
        if name in ROOT_OPS:
            roots.add(name)
        elif name in LOG_OPS:
            log = True
        elif name.startswith("PowBackward"):
            try:
                exponent = float(node._saved_exponent)
            except (AttributeError, RuntimeError, TypeError, ValueError):
                exponent = None
            if exponent is not None and 0 < exponent < 1:
                roots.add(f"{name} (exponent {exponent:g})")
        elif name.startswith("WhereBackward"):
            where = True
    return sorted(roots), where and log


def _read_at_once(t) -> bool:
    """Whether reading `t` costs no device synchronisation (it lives in host memory)."""
    return t.device.type == "cpu"


def _finite(t) -> bool:
    t = t.detach()
    total = t.sum(dtype=torch.float32) if t.dtype in (torch.float16, torch.bfloat16) else t.sum()
    return bool(torch.isfinite(total))


class NonFinite(Check):
    __doc__ = __doc__
    code = "KBW006"
    name = "nonfinite-loss-or-grad"
    entry = "nan-loss"
    also = ("nan-grad-at-zero", "fp16-overflow")
    title = "a NaN or infinite loss or gradient: the first step, and the first module whose output was non-finite"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        # the module outputs of the latest forward pass, in completion order, looked at only when
        # the loss computed from them is non-finite: a healthy run pays one append per module on
        # sampled steps. They are dropped as soon as a finite loss is seen, so no activation is
        # held into the backward pass (which would raise its peak memory).
        self.outputs = []
        self.loss_step = self.loss_value = self.loss_site = self.loss_where = None
        self.grad_step = None
        self.grad_with_finite_loss = None
        self.grad_unsampled = False    # dated on an unsampled step by the device flag
        self.loss_finite_at = None     # step of the last finite loss seen
        self.first_module = None       # (name, class, step, weights finite)
        self.batch_step = None
        self.graph = None              # grad_fn of the latest finite float32/64 loss, until the step
        # what _graph_ops read behind the loss of the first non-finite gradient: root-like ops, and whether a
        # torch.where and a log op are both there (the guard pattern of nan-loss)
        self.roots = self.guarded_log = None
        self.grad_call = None          # (step, site) of the first autograd.grad call that returned NaN from finite outputs
        self.step_graph = None         # grad_fn of the latest sampled backward, finite or not, until the step
        # unsampled steps: the tensor the latest backward started from, until its step(); on an
        # accelerator, (step, gradient norm, loss sum) of each unsampled step, left on the device
        # and read together at the next sampled step (two small ops a step, one read per sample)
        self.unsampled_loss = None
        self.unread: list = []

    def on_root_forward(self, model, grad_enabled):
        self.outputs = []  # a new forward pass: the previous one's outputs are not needed

    def on_module_forward(self, module, output, grad_enabled):
        if self.first_module is None and len(self.outputs) < MAX_OUTPUTS:
            t = first_tensor(output)
            if t is not None and t.is_floating_point() and t.numel():
                self.outputs.append((module, t))

    def on_step_post(self, optimizer):
        self.outputs = []
        self.graph = None

    def _locate(self) -> None:
        """Name the first module of the latest forward pass whose output was non-finite."""
        if self.first_module is None:
            for module, t in self.outputs:
                if not _finite(t):
                    own = list(module.parameters(recurse=False))
                    weights_finite = all(bool(torch.isfinite(p.detach()).all()) for p in own) if own else None
                    overflow = t.dtype == torch.float16 and bool(torch.isinf(t.detach()).any())
                    self.first_module = (self.session.module_name(module), type(module).__name__, self.session.step,
                                         weights_finite, str(t.dtype).replace("torch.", ""), overflow)
                    break
        self.outputs = []

    def on_batch(self, loader, batch):
        if self.batch_step is not None:
            return
        t = first_tensor(batch)
        if t is not None and t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()):
            self.batch_step = self.session.step

    def on_loss(self, call):
        out = call.output
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
            return
        if _finite(out):
            self.loss_finite_at = self.session.step
            self.outputs = []
            return
        if self.loss_step is None:
            self.loss_step, self.loss_site, self.loss_where = self.session.step, call.site, loss_where(call)
            self.loss_value = float(out.detach().float().sum())
        self._locate()

    def on_autograd_grad(self, outputs, results, site):
        if self.grad_call is not None or self.loss_step is not None or self.grad_step is not None:
            return
        results = [r for r in results if isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel()]
        outputs = [o for o in outputs if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel()]
        if not results or not outputs or all(_finite(r) for r in results) or not all(_finite(o) for o in outputs):
            return
        if any(bool(torch.isnan(r.detach()).any()) for r in results):
            self.grad_call = (self.session.step, site)
            graphs = [o.grad_fn for o in outputs if o.grad_fn is not None]
            if graphs:
                self.roots, self.guarded_log = _graph_ops(graphs)

    def on_any_backward(self, tensors):
        if self.session.sampled or self.grad_step is not None:
            return
        t = tensors[0] if tensors else None
        if isinstance(t, torch.Tensor) and t.is_floating_point() and 0 < t.numel() <= 1 << 16:
            self.unsampled_loss = t  # until this step's step(): its value, and its graph's ops if needed

    def on_any_step_pre(self, optimizer):
        """An unsampled step: a NaN gradient born under a finite loss. On the CPU it is read at once
        (no synchronisation to avoid); on an accelerator it stays there until the next sampled step."""
        s = self.session
        if s.sampled or self.grad_step is not None or self.unsampled_loss is None:
            return
        primary = s.primary_info()
        if primary is None or primary.optimizer is not optimizer:
            return
        loss, self.unsampled_loss = self.unsampled_loss, None
        grads = [p.grad for p in s.params_of(optimizer) if p.grad is not None]
        if not grads:
            return
        if all(_read_at_once(g) for g in grads):
            if math.isnan(host_grad_norm(grads)) and _finite(loss):
                self.grad_step, self.grad_with_finite_loss, self.grad_unsampled = s.step, True, True
                if loss.grad_fn is not None and loss.dtype in (torch.float32, torch.float64):
                    self.roots, self.guarded_log = _graph_ops(loss.grad_fn)
            return
        norm = grad_norm_tensor(grads)
        if loss.device != norm.device or len(self.unread) >= MAX_UNREAD:
            return
        self.unread.append((s.step, norm, loss.detach().sum()))

    def _read_unsampled(self) -> None:
        """Take a NaN gradient dated on an unsampled step (one synchronisation, on a sampled step)."""
        unread, self.unread = self.unread, []
        if not unread or self.grad_step is not None:
            return
        with torch.no_grad():
            norms = torch.stack([norm for _, norm, _ in unread])
            losses = torch.stack([loss.to(norms.dtype) for _, _, loss in unread])
            born = (torch.isnan(norms) & torch.isfinite(losses)).tolist()
        step = next((st for (st, _, _), b in zip(unread, born) if b), -1)
        if step >= 0:
            self.grad_step, self.grad_with_finite_loss, self.grad_unsampled = step, True, True
            graph = self.step_graph if self.step_graph is not None else self.graph
            if graph is not None:
                self.roots, self.guarded_log = _graph_ops(graph)

    def on_before_backward(self, tensors):
        """The tensor backward() starts from: a loss even when no torch loss function made it."""
        t = tensors[0] if tensors else None
        if isinstance(t, torch.Tensor) and t.is_floating_point() and 0 < t.numel() <= 1 << 16:
            self.step_graph = t.grad_fn
            if _finite(t):
                self.loss_finite_at = self.session.step
                if self.grad_step is None and t.dtype in (torch.float32, torch.float64):
                    self.graph = t.grad_fn
            elif self.loss_step is None:
                self.loss_step, self.loss_where = self.session.step, "the tensor backward() started from"
                self.loss_value = float(t.detach().float().sum())
                self.loss_site = self.session.where()
                self._locate()
        self.outputs = []  # never held into the backward pass

    def on_step_pre(self, optimizer):
        self._read_unsampled()
        self.step_graph = None
        if self.grad_step is not None:
            return
        norm = self.session.grad_norm(optimizer)
        if norm is not None and not math.isfinite(norm):
            self.grad_step = self.session.step
            self.grad_with_finite_loss = self.loss_finite_at == self.session.step and self.loss_step is None
            if self.grad_with_finite_loss and self.graph is not None and math.isnan(norm):
                self.roots, self.guarded_log = _graph_ops(self.graph)
            self.graph = None
            self._locate()

    def on_end(self):
        self._read_unsampled()
        self.step_graph = None

    def findings(self) -> list:
        if self.loss_step is None and self.grad_step is None and self.grad_call is None:
            return []
        parts = []
        if self.grad_call is not None:
            parts.append(f"torch.autograd.grad ({self.grad_call[1] or 'create_graph=True'}) returned NaN from finite "
                         f"outputs at step {self.grad_call[0]}: the NaN is born in a gradient the forward pass takes")
        if self.grad_step is not None and (self.loss_step is None or self.grad_step < self.loss_step):
            parts.append(f"the gradient became {'NaN' if self.grad_unsampled else 'non-finite'} at step {self.grad_step}"
                         + (" while the loss was still finite: the NaN is born in the backward pass"
                            if self.grad_with_finite_loss else ""))
            if self.loss_step is not None:
                parts.append(f"the loss followed at step {self.loss_step}")
        else:
            parts.append(f"the loss became {_word(self.loss_value)} at step {self.loss_step} ({self.loss_where})")
            if self.grad_step is not None and self.grad_step == self.loss_step:
                parts.append("the gradient with it")
        if self.first_module is not None:
            name, cls, step, weights_finite, dtype, overflow = self.first_module
            where = f"first module with a non-finite output at step {step}: {name} ({cls})"
            if weights_finite is False:
                where += ", whose own weights were already non-finite (an earlier update poisoned them)"
            elif weights_finite:
                where += ", whose weights were finite"
            parts.append(where)
        fp16 = (self.first_module is not None and self.first_module[5] and self.first_module[3] is not False
                and self.batch_step is None)
        if fp16:
            parts.append("its float16 output overflowed to inf (float16 ends at 65504): compute in float32 under "
                         "torch.autocast with a GradScaler, use bfloat16, or keep that layer in float32")
        if self.batch_step is not None:
            parts.append(f"the input batch held non-finite values at step {self.batch_step}")
        at_zero = bool(self.roots) and not self.guarded_log
        if at_zero:
            behind = "the gradient taken" if self.grad_call else "that loss"
            parts.append(f"the graph behind {behind} holds {', '.join(self.roots)}, whose derivative is infinite "
                         f"at 0, and no torch.where guarding a log: an argument exactly 0 (a zero distance or norm) "
                         f"gives an inf or NaN gradient; add an epsilon inside the root or mask the zeros before it")
        first = min(s for s in (self.loss_step, self.grad_step, self.grad_call and self.grad_call[0]) if s is not None)
        evidence = {"loss_step": self.loss_step, "loss_value": self.loss_value, "loss": self.loss_where,
                    "grad_step": self.grad_step, "grad_nonfinite_with_finite_loss": self.grad_with_finite_loss,
                    "first_module": dict(zip(("name", "class", "step", "weights_finite", "dtype", "float16_overflow"),
                                             self.first_module))
                    if self.first_module else None, "batch_step": self.batch_step,
                    "grad_step_unsampled": self.grad_unsampled,
                    "autograd_grad_nan": dict(zip(("step", "site"), self.grad_call)) if self.grad_call else None,
                    "root_ops": self.roots, "where_guarding_log": self.guarded_log}
        where = (self.grad_call[1] if self.grad_call else None) or self.loss_site or self.session.where()
        return [self.finding("; ".join(parts), evidence=evidence, where=where,
                             step=first, entry="nan-grad-at-zero" if at_zero else "fp16-overflow" if fp16 else None)]


def _word(value) -> str:
    if value is None or value != value:
        return "nan"
    return "inf" if value > 0 else "-inf"
