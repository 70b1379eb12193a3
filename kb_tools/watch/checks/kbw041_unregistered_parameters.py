"""KBW041: parameters the forward pass uses that no model registers and no optimizer holds.

Criterion: on at least 3 sampled steps of a run whose optimizers step, the backward() graph
reaches nn.Parameter leaves that require grad, belong to no watched model's parameters() and to
no optimizer (the graph is walked on the first MAX_WALKS sampled backward() calls, at most
20,000 nodes each). Modules kept in a plain Python list or dict are called in forward() but are
not submodules, so their weights get gradients and never train, are not saved in state_dict()
and are not moved by .to(). A parameter registered directly on a module of the user's own class
(not a torch.nn layer) is left alone: that module, an ensemble with a learnable scale say, is
simply not trained yet.

Second form: on at least 3 sampled steps the graph reaches a leaf tensor that requires grad, is no
nn.Parameter, belongs to no optimizer and is held as a plain attribute of a module (the same tensor
each time: `self.w = torch.randn(n, m, requires_grad=True)` in __init__), and its values are the
same at the end of the run as when first seen. nn.Module registers only Parameters, buffers and
submodules, so such a tensor gets a gradient and is never trained, saved or moved. A tensor that
some optimizer holds, one updated by hand (its values move), and inputs made to require grad (not
module attributes) are left out.

Third form: the same for a tensor that does not require grad but that the user's code filled with a
torch.nn.init random initialiser (`self.w = torch.empty(n); nn.init.uniform_(self.w)`): weights drawn
for training, held where nothing registers them, so they get no gradient at all and stay at their
draw. It is judged like the second form (a plain attribute of a watched model's module on at least 3
sampled steps, no optimizer holds it, its values never change), and one that shares its storage
with a registered parameter or buffer is left out.
"""
from __future__ import annotations

import itertools
import weakref

import torch

from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.tensors import graph_leaves, value_fingerprint

MIN_STEPS = 3
MAX_WALKS = 6
MAX_LEAVES = 4096
MAX_PLAIN = 8
MAX_DRAWN = 256


def _plain_attributes(session) -> dict:
    """id -> "Class.attribute" of the tensors (not Parameters) held as plain attributes of the watched
    models' modules and of the modules created while watching."""
    modules = {id(m): m for info in session.models if info.module is not None for m in info.module.modules()}
    for module in list(session.module_sites.keys()):
        modules.setdefault(id(module), module)
    out = {}
    for module in modules.values():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                out.setdefault(id(value), f"{type(module).__name__}.{attr}")
    return out


def _owned_by_user_modules(session) -> set:
    """ids of the parameters registered directly on a module of the user's own class created while
    watching: an ensemble holding a learnable scale that no optimizer holds yet is registered, only
    not trained for now; a layer kept in a list (a torch.nn class) owns its weights just as well, so
    torch's own classes do not count."""
    out = set()
    for module in list(session.module_sites.keys()):
        if not type(module).__module__.startswith("torch."):
            out.update(id(p) for p in module.parameters(recurse=False))
    return out


def _shares_registered_storage(session, t) -> bool:
    """Whether `t` views the storage of a watched model's registered parameter or buffer (a `.data`
    alias kept beside the Parameter is that Parameter, registered)."""
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return True   # a tensor without plain storage (a wrapper subclass): not judged
    for info in session.models:
        module = info.module
        if module is None:
            continue
        for p in itertools.chain(module.parameters(), module.buffers()):
            if p.untyped_storage().data_ptr() == ptr:
                return True
    return False


class UnregisteredParameters(Check):
    __doc__ = __doc__
    code = "KBW041"
    name = "unregistered-parameters"
    entry = "modules-in-python-list"
    title = "parameters used in forward() that no model registers and no optimizer holds (modules in a plain list)"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.walks = 0
        self.steps: set[int] = set()
        self.shapes: list[str] = []
        self.count = 0
        self.plain: dict[int, list] = {}  # id -> [weakref, "Class.attr", shape, fingerprint, sampled steps, moved,
        #                                          the initialiser and its file:line when nn.init drew it (third form)]
        self.drawn: dict[int, tuple] = {}  # id -> (weakref, initialiser, file:line): plain tensors nn.init filled

    def on_random_init(self, tensor, name, site):
        if len(self.drawn) >= MAX_DRAWN:   # most are temporaries (`init.normal_(m.weight.data)`): drop the dead
            self.drawn = {k: v for k, v in self.drawn.items() if v[0]() is not None}
            if len(self.drawn) >= MAX_DRAWN:
                return
        self.drawn[id(tensor)] = (weakref.ref(tensor), name, site)

    def on_before_backward(self, tensors):
        s = self.session
        if self.walks >= MAX_WALKS or not s.optimizers or not s.models:
            return
        self.walks += 1
        registered = {id(p) for m in s.models if m.module is not None for p in m.module.parameters()}
        held = s.trainable_ids()
        leaves = graph_leaves(tensors, MAX_LEAVES)
        drawn = [t for t in (ref() for ref, _, _ in self.drawn.values()) if t is not None
                 and not t.requires_grad and id(t) not in held]
        self._plain_leaves([t for t in leaves if not isinstance(t, torch.nn.Parameter) and t.requires_grad
                            and id(t) not in held] + drawn)
        loose = [t for t in leaves if isinstance(t, torch.nn.Parameter)
                 and t.requires_grad and id(t) not in registered and id(t) not in held]
        if loose:
            owned = _owned_by_user_modules(s)
            loose = [t for t in loose if id(t) not in owned]
        if loose:
            self.steps.add(s.step)
            self.count = max(self.count, len(loose))
            if not self.shapes:
                self.shapes = [str(tuple(t.shape)) for t in loose[:6]]

    def _plain_leaves(self, leaves: list) -> None:
        if not leaves:
            return
        attributes = _plain_attributes(self.session)
        for t in leaves:
            attr = attributes.get(id(t))
            if attr is None:
                continue
            st = self.plain.get(id(t))
            if st is not None and st[0]() is not t:
                st = None  # another tensor now has that id
            if st is None:
                if len(self.plain) >= MAX_PLAIN and id(t) not in self.plain:
                    continue
                if not t.requires_grad and _shares_registered_storage(self.session, t):
                    continue
                init = self.drawn.get(id(t))
                init = init[1:] if init is not None and init[0]() is t else None
                st = self.plain[id(t)] = [weakref.ref(t), attr, str(tuple(t.shape)), value_fingerprint(t), set(), False,
                                          init]
            elif value_fingerprint(t) != st[3]:
                st[5] = True
            st[4].add(self.session.step)

    def on_end(self):
        for st in self.plain.values():
            t = st[0]()
            if t is not None and not st[5] and value_fingerprint(t) != st[3]:
                st[5] = True  # trained or updated after the walks: not left out

    def findings(self) -> list:
        if not any(info.steps for info in self.session.optimizers.values()):
            return []
        return self._parameters() + self._plain()

    def _plain(self) -> list:
        found = [st for st in self.plain.values() if len(st[4]) >= MIN_STEPS and not st[5]]
        if not found:
            return []
        where = self.session.where()
        out = []
        grad = [st for st in found if st[6] is None]
        if grad:
            message = (f"{plural(len(grad), 'tensor')} with requires_grad=True kept as plain module "
                       f"attributes ({names([f'{st[1]} {st[2]}' for st in grad], 3)}) took part in the forward pass on "
                       f"{plural(min(len(st[4]) for st in grad), 'sampled step')} and never changed, but no optimizer "
                       f"holds them ({created_at('optimizer', where)}): a tensor that is not an nn.Parameter is not "
                       f"registered, so it is not in parameters(), never trains, is not saved in state_dict() and is "
                       f"not moved by .to(); wrap it in nn.Parameter (nn.ParameterList or nn.ParameterDict for several)")
            out.append(self._plain_finding(message, where, grad))
        drawn = [st for st in found if st[6] is not None]
        if drawn:
            first, one = drawn[0][6], len(drawn) == 1
            message = (f"{plural(len(drawn), 'tensor')} filled by a torch.nn.init initialiser (nn.init.{first[0]} at "
                       f"{first[1]}) {'is kept as a plain module attribute' if one else 'are kept as plain module attributes'} "
                       f"({names([f'{st[1]} {st[2]}' for st in drawn], 3)}), not nn.Parameter: "
                       f"{'it' if one else 'they'} got no gradient, no optimizer holds "
                       f"{'it' if one else 'them'} ({created_at('optimizer', where)}) and the values stayed "
                       f"at their draw over {plural(min(len(st[4]) for st in drawn), 'sampled step')}; nn.Module "
                       f"registers only Parameters, buffers and submodules, so weights drawn this way never train, are "
                       f"not saved in state_dict() and are not moved by .to(); wrap it in nn.Parameter (or "
                       f"register_buffer if it is meant to stay fixed)")
            out.append(self._plain_finding(message, where, drawn))
        return out

    def _plain_finding(self, message: str, where, found: list):
        return self.finding(message, where=where, step=min(min(st[4]) for st in found), evidence={
            "tensors": [st[1] for st in found], "shapes": [st[2] for st in found],
            "sampled_steps": min(len(st[4]) for st in found)})

    def _parameters(self) -> list:
        if len(self.steps) < MIN_STEPS:
            return []
        where = self.session.where()
        models = ", ".join(m.cls for m in self.session.models[:3])
        message = (f"{plural(self.count, 'parameter')} (shapes {', '.join(self.shapes)}) took part in the forward pass "
                   f"on {plural(len(self.steps), 'sampled step')} but belong to no model's parameters() ({models}) and "
                   f"to no optimizer ({created_at('optimizer', where)}): modules held in a plain list or dict are not "
                   f"registered, so they never train, are not saved and are not moved by .to(); use nn.ModuleList or "
                   f"nn.ModuleDict")
        return [self.finding(message, where=where, step=min(self.steps),
                             evidence={"parameters": self.count, "shapes": self.shapes, "steps": sorted(self.steps)})]
