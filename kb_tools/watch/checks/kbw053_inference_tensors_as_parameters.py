"""KBW053: a model's parameters or buffers are inference tensors (created under torch.inference_mode()).

Criterion: the first forward of a watched model finds at least one parameter or buffer for which
`is_inference()` is true. Such a tensor can never join autograd: saving it for backward raises
"Inference tensors cannot be saved for backward" and the optimizer's in-place update raises
"Inplace update to inference tensor". The finding is recorded before the forward runs, so the
report names the cause beside the run's error. A model built under torch.no_grad() is fine and
is not reported.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, names, plural


class InferenceTensorsAsParameters(Check):
    __doc__ = __doc__
    code = "KBW053"
    name = "inference-tensors-as-parameters"
    entry = "model-built-under-no-grad"
    title = "parameters or buffers created under torch.inference_mode(): they cannot be trained"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.looked: weakref.WeakSet = weakref.WeakSet()  # weak: a dropped module's id can be reused
        self.found: list = []  # (model class, site, tensor names, count)

    def on_root_forward(self, info, grad_enabled):
        module = info.module
        if module is None or module in self.looked:
            return
        self.looked.add(module)
        tensors = list(module.named_parameters()) + list(module.named_buffers())
        bad = [name for name, t in tensors if t.is_inference()]
        if bad:
            self.found.append((info.cls, info.site, bad, len(tensors)))

    def findings(self) -> list:
        out = []
        for cls, site, bad, total in self.found:
            message = (f"{plural(len(bad), 'parameter or buffer', 'parameters or buffers')} of {cls} "
                       f"({created_at('model', site)}) are inference tensors ({names(bad)}; {len(bad)} of {total}): "
                       f"they were created or moved under torch.inference_mode(), and autograd and the optimizer "
                       f"cannot use them; build, load and move the model outside inference_mode (no_grad is fine)")
            out.append(self.finding(message, where=site, step=0, evidence={
                "model": cls, "inference_tensors": bad[:50], "count": len(bad), "tensors": total}))
        return out
