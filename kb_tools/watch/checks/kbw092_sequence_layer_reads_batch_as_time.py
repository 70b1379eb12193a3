"""KBW092: a recurrent or attention layer built time-major (batch_first=False, the default) is fed
the loader's batch on its first axis, so it reads the samples as the steps of one sequence: each
sample's output depends on the samples beside it in the batch, and the real time axis is taken for
the batch.

Criterion: on a sampled training step (grad enabled) whose DataLoader batch holds a tensor of
`loader.batch_size` rows B, an nn.RNN / LSTM / GRU or nn.MultiheadAttention with batch_first=False
receives a 3-D tensor input (its query, for attention) shaped (B, S, F) with S neither 1 nor B;
or, when the loader shuffles (a RandomSampler), shaped (B, F) or (B, 1, F): shuffled samples are
no sequence. On at least MIN_CALLS sampled calls of one layer, and on at least SHARE of its calls
compared. A packed sequence, a loader without a batch size, or an input whose first axis is not B
(a time-major collate, a transpose before the layer) is not compared; an input of (B, B, F) cannot
tell the axes apart and is not counted.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, names, plural
from kb_tools.watch.checks.tensors import iter_tensors

MIN_CALLS = 3
SHARE = 0.5
MAX_LAYERS = 64
LAYERS = (torch.nn.RNNBase, torch.nn.MultiheadAttention)


class SequenceLayerReadsBatchAsTime(Check):
    __doc__ = __doc__
    code = "KBW092"
    name = "sequence-layer-reads-batch-as-time"
    entry = "batch-independence-check"
    title = "a batch_first=False recurrent or attention layer gets the batch on its first (time) axis"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.batch: tuple | None = None  # (step, rows, shuffled, loader site) of the last sampled batch
        self.layers: dict = {}  # id(module) -> [name, class, compared, matched, first step, first shape, site, batch info]

    def on_batch(self, loader, batch):
        size = getattr(loader, "batch_size", None) if loader is not None else None
        if not isinstance(size, int) or size < 2 \
                or not any(t.dim() >= 1 and t.shape[0] == size for t in iter_tensors(batch)):
            return
        shuffled = isinstance(getattr(loader, "sampler", None), torch.utils.data.RandomSampler)
        self.batch = (self.session.step, size, shuffled, self.session.loader_site(loader))

    def on_module_input(self, module, args):
        if not isinstance(module, LAYERS) or getattr(module, "batch_first", True) or not args \
                or not torch.is_grad_enabled() or self.batch is None or self.batch[0] != self.session.step:
            return
        x = args[0]
        if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3):
            return
        _, rows, shuffled, loader_site = self.batch
        if x.shape[0] == rows and x.dim() == 3 and x.shape[1] == rows:
            return
        st = self.layers.get(id(module))
        if st is None:
            if len(self.layers) >= MAX_LAYERS:
                return
            st = self.layers[id(module)] = [self.session.module_name(module), type(module).__name__, 0, 0, None, None,
                                            self.session.module_sites.get(module), None]
        st[2] += 1
        across = x.dim() == 3 and x.shape[1] not in (1, rows)
        alone = shuffled and (x.dim() == 2 or x.shape[1] == 1)
        if x.shape[0] == rows and (across or alone):
            st[3] += 1
            if st[4] is None:
                st[4], st[5], st[7] = self.session.step, tuple(x.shape), (rows, shuffled, loader_site)

    def findings(self) -> list:
        hit = [st for st in self.layers.values() if st[3] >= MIN_CALLS and st[3] >= SHARE * st[2]]
        if not hit:
            return []
        first = min(hit, key=lambda st: st[4])
        name, cls, compared, matched, step, shape, site, (rows, shuffled, loader_site) = first
        layers = [f"{st[0]} ({st[1]})" for st in hit]
        created = f" (created at {site})" if site else ""
        loader = f"the DataLoader's batch of {rows}" + (f" (created at {loader_site})" if loader_site else "")
        mixed = "the other samples of" if cls == "MultiheadAttention" else "the samples before it in"
        if len(shape) == 3 and shape[1] != 1:
            read = (f"it reads axis 0 as time and axis 1 ({shape[1]}) as the batch, so each sample's output "
                    f"depends on {mixed} the batch and the real sequence axis is treated as samples")
        else:
            read = (f"it reads the shuffled samples as the steps of one sequence, so each sample's output depends on "
                    f"{mixed} the batch")
        message = (f"{plural(len(layers), 'batch_first=False layer')} ({names(layers, 3)}) received inputs shaped "
                   f"{shape} whose first axis is {loader}: {name}{created} on {matched} of {compared} sampled "
                   f"training calls from step {step}; {read}. Build the layer with batch_first=True, or transpose "
                   f"the input to (sequence, batch, features)")
        return [self.finding(message, where=site, step=step, evidence={
            "layers": [st[0] for st in hit][:20], "input_shape": list(shape), "batch_rows": rows,
            "shuffled": shuffled, "matched_calls": matched, "compared_calls": compared})]
