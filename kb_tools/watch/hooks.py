"""Installing and removing the global instrumentation of a watched run.

Everything here is torch's own global extension points or a plain attribute swap that is undone
on uninstall, so the user's code needs no change:
- optimizer steps: torch.optim.optimizer.register_optimizer_step_pre_hook / _post_hook (every step:
  they count steps, decide sampling and stop the run after --steps N);
- module forwards: torch.nn.modules.module.register_module_forward_pre_hook / forward_hook, only
  while a sampled step runs (a global module hook sends every module call down torch's slow path);
  each model found gets a forward pre hook of its own, which costs one call per model forward;
- losses: the loss functions of torch.nn.functional are wrapped (nn loss modules call them too;
  `_Loss.__call__` tells which module is calling, so the loss is placed where it was created); on a
  step that is not sampled, the first calls under no_grad (an evaluation loop) reach the checks that
  watch evaluation;
- backward: torch.autograd.backward, which Tensor.backward calls;
- creation sites: the constructors of Module, Optimizer, LRScheduler, GradScaler and DataLoader
  record the first frame of the user's code, and DataLoader iterators count batches;
- gradient clipping: torch.nn.utils.clip_grad_norm_ and clip_grad_value_ are wrapped (the
  parameters, the threshold and the norm clip_grad_norm_ returned reach the checks on sampled steps);
- torch.autograd.grad with create_graph=True (a gradient the forward pass takes) reaches the checks
  with its results on sampled steps;
- torch.rand, torch.rand_like and Tensor.uniform_, while a check listens: a draw of at least two values
  on a line of the user's code that thresholds it with one number between 0 and 1 (a dropout mask
  written by hand) reaches the checks with that line, on every call; the line is parsed once;
- torch.no_grad's __enter__ and __exit__, while a check listens: on sampled steps, a block of the
  user's code entered with grad enabled reaches the checks with the caller's frame at its start and
  its end (a decorated function is not a block of the user's code: torch's decorator enters it);
- std and var (torch.std/var/std_mean/var_mean and the Tensor methods): on every call, a shape test
  on the result; only a reduction of one element per output value looks at its values;
- log, log1p, log_softmax and logsumexp (torch's and the Tensor methods; F.log_softmax calls the
  method): on sampled steps, while a check listens, a result that requires grad reaches the checks
  with its input (a loss written by hand, such as a GAN's; logits normalised by hand);
- view and reshape (Tensor.view, Tensor.reshape, torch.reshape): on sampled steps, while a check
  listens, a result of another shape reaches the checks with both shapes (a view that reorders
  dimensions instead of a permute);
- torch.utils.checkpoint.checkpoint: a reentrant call whose inputs need no gradient reaches the
  checks on sampled steps;
- torch.tensor and torch.as_tensor, while a check listens: on sampled steps with grad enabled, data
  holding tensors that require grad (torch.tensor(t), or a list or tuple of them, nested: the copy
  keeps their values without their graph; torch.as_tensor(t) returns t itself and is passed over)
  reaches the checks with the copy and the caller's site (torch.Tensor(list) is not watched);
- Optimizer.load_state_dict: that an optimizer took a checkpoint's groups and state, and where
- Module.load_state_dict: what it reports (the keys missing from the checkpoint and the keys it
  did not use) reaches the checks on every call, with the caller's file and line;
- Module.train (which eval() calls): every module it reaches, directly or through a parent's call,
  is recorded as one whose mode the user's code set (Session.modes_set), on every call;
- torch.jit.script: it runs with torch's own functions put back (scripted code is compiled from
  them, so it runs unwatched, as it would without kb watch).
On a step that is not sampled each wrapper returns after one attribute test.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import ast
import itertools
import sys

import torch
import torch.nn.functional as F
from torch.nn.modules import loss as loss_modules
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.amp import grad_scaler
from torch.nn.utils import clip_grad
from torch.optim import lr_scheduler
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.data import dataloader

from kb_tools.watch.checks import ATTENTION_DROPOUT, overridden
from kb_tools.watch.checks.tensors import inside_function_transform
from kb_tools.watch.sites import StopWatching, caller_is_torch, library_file, show_path, user_site

SPREAD_FUNCTIONS = ("std", "var", "std_mean", "var_mean")
LOG_FUNCTIONS = ("log", "log1p", "log_softmax", "logsumexp")
RESHAPE_METHODS = ("view", "reshape")
COPY_FUNCTIONS = ("tensor", "as_tensor")
# torch.nn.init's random initialisers (the constant ones fill states and masks as often as weights)
RANDOM_INITS = ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                "kaiming_normal_", "orthogonal_", "sparse_")
INDEX_FUNCTIONS = ("argmax", "argmin", "max", "min")  # torch functions and Tensor methods: indices, no gradient
COPY_SCAN = 64  # items of a copy's nested list or tuple searched for a tensor that requires grad
LOSS_FUNCTIONS = ("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                  "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "ctc_loss")
_MISSING = object()
_active = None  # the Session being watched; one at a time per process


def active_session():
    return _active


@contextlib.contextmanager
def unwatched():
    """Run a check's own call into the user's code (reading a dataset item) with every hook
    passing through: what that call does is no part of the run."""
    global _active
    saved, _active = _active, None
    try:
        yield
    finally:
        _active = saved


def _guard(session, where: str, fn, *args):
    """Run instrumentation code so that its own failure never reaches the user's program; none runs
    inside a torch.func transform (tensors.inside_function_transform)."""
    if inside_function_transform():
        return None
    try:
        return fn(*args)
    except StopWatching:
        raise
    except Exception as exc:  # noqa: BLE001
        if len(session.internal_errors) < 20:
            session.internal_errors.append(f"{where}: {type(exc).__name__}: {exc}")
        return None


def _legacy_reduction(bound: dict) -> None:
    if bound.get("size_average") is not None or bound.get("reduce") is not None:
        from torch.nn import _reduction
        bound["reduction"] = _reduction.legacy_get_string(bound.get("size_average"), bound.get("reduce"))
    bound.pop("size_average", None)
    bound.pop("reduce", None)


_UNSET = object()  # an argument the caller left out


def _dropout_wrapper(original):
    """F.dropout: tell the session when it drops units (training=True, p > 0), and whether the caller
    passed `training` or left it at its default, on every step: the checks behind it cost one
    comparison unless a model is running in eval mode (or on a sampled step, in training mode)."""
    @functools.wraps(original)
    def wrapper(input, p=0.5, training=_UNSET, inplace=False):
        given = training is not _UNSET
        training = training if given else True  # F.dropout's own default
        s = _active
        if s is not None and training and p > 0 and not s.stopped:
            _guard(s, "dropout", s.dropout_call, p, given)
        return original(input, p, training, inplace)
    return wrapper


def _attention_dropout_wrapper(original):
    """F.scaled_dot_product_attention: its dropout_p drops attention weights whatever the caller's
    mode (it has no training flag), so a dropout_p > 0 is a dropout the caller did not gate unless
    its own code passes 0 in eval mode; told to the session like F.dropout without `training`."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        s = _active
        if s is not None and not s.stopped:
            p = args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)
            if isinstance(p, (int, float)) and p > 0 and not caller_is_torch(depth=2):  # MultiheadAttention gates it
                _guard(s, "scaled_dot_product_attention", s.dropout_call, float(p), False, ATTENTION_DROPOUT)
        return original(*args, **kwargs)
    return wrapper


def _bernoulli_probability(name: str, args: tuple, kwargs: dict):
    """The probability of a Bernoulli draw: `x.bernoulli_(p=0.5)` fills x with draws of probability
    p; `torch.bernoulli(input)` and `x.bernoulli()` draw with input's values unless p is given."""
    p = args[1] if len(args) > 1 else kwargs.get("p")
    if name == "bernoulli_":
        return 0.5 if p is None else p
    return p if p is not None else (args[0] if args else kwargs.get("input"))


def _bernoulli_wrapper(name: str, original):
    """torch.bernoulli and Tensor.bernoulli / bernoulli_: a 0/1 mask drawn by hand (a dropout written
    in forward()) reaches the checks that listen, with its probability; otherwise one attribute
    test per call."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        s = _active
        if s is not None and s.bernoulli_watched and not s.stopped:
            _guard(s, name, s.bernoulli_call, _bernoulli_probability(name, args, kwargs))
        return original(*args, **kwargs)
    return wrapper


MIN_MASK_ELEMENTS = 2  # a single draw (`torch.rand(1) < p`) is a coin flip, not a mask
_DRAWS = ("rand", "rand_like", "uniform_")


def _is_draw(node) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, (ast.Name, ast.Attribute)) and getattr(func, "id", getattr(func, "attr", None)) in _DRAWS


def _contains_draw(node) -> bool:
    return any(_is_draw(n) for n in ast.walk(node))


def _threshold_operand(line: str):
    """The expression a uniform draw is thresholded against on this line, as an AST node: the other
    side of a comparison with the draw (`torch.rand(x.shape) > p`), or the number added to it before
    a floor or round (`(torch.rand(n) + keep).floor()`); None when the line does not make a mask
    (a draw kept as noise, argsorted, or a statement spread over several lines)."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            left, right = node.left, node.comparators[0]
            if _contains_draw(left) != _contains_draw(right):
                return right if _contains_draw(left) else left
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("floor", "floor_", "round"):
            inner = node.func.value if node.args == [] else node.args[0]
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" and node.args:
                inner = node.args[0]
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add):
                if _contains_draw(inner.left) != _contains_draw(inner.right):
                    return inner.right if _contains_draw(inner.left) else inner.left
    return None


_NOTHING = object()  # a name the caller's frame does not hold
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b}


def _number(node, frame):
    """The value of a threshold expression made of numbers, names and instance attributes (`p`,
    `self.dropout`, `1 - self.p`), read from the caller's frame without calling anything; a tensor
    counts when it holds one value. None for anything else (a tensor of probabilities: sampling)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _number(node.operand, frame)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _number(node.left, frame), _number(node.right, frame)
        try:
            return None if a is None or b is None else _OPS[type(node.op)](a, b)
        except ZeroDivisionError:
            return None
    value = _NOTHING
    if isinstance(node, ast.Name):
        value = frame.f_locals.get(node.id, frame.f_globals.get(node.id, _NOTHING))
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        owner = frame.f_locals.get(node.value.id, frame.f_globals.get(node.value.id))
        value = getattr(owner, "__dict__", {}).get(node.attr, _NOTHING)
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.requires_grad:
        value = value.item()
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mask_threshold(frame, cache: dict):
    """The number strictly between 0 and 1 that the caller's line thresholds a uniform draw with, or None."""
    key = (frame.f_code.co_filename, frame.f_lineno)
    if key not in cache:
        import linecache
        cache[key] = _threshold_operand(linecache.getline(*key))
    operand = cache[key]
    value = _number(operand, frame) if operand is not None else None
    return value if value is not None and 0 < value < 1 else None


def _uniform_wrapper(name: str, original):
    """torch.rand / rand_like and Tensor.uniform_: a uniform draw of at least two values that the
    calling line of the user's code thresholds into a 0/1 mask with one number between 0 and 1
    (`(torch.rand(x.shape) > p).float()`, `(torch.rand(n) + keep).floor()`: a dropout written by
    hand) reaches the checks that listen, with the caller's file and line; a draw compared with a
    tensor of probabilities samples something and is not passed on. Otherwise one attribute test
    per call."""
    lines: dict = {}

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        s = _active
        if s is not None and s.uniform_mask_watched and not s.stopped and isinstance(out, torch.Tensor) \
                and out.numel() >= MIN_MASK_ELEMENTS:
            caller = sys._getframe(1)
            code = caller.f_code
            if not library_file(code.co_filename) and len(lines) < 4096 and _mask_threshold(caller, lines) is not None:
                _guard(s, name, s.uniform_mask_call, f"{show_path(code.co_filename)}:{caller.f_lineno}")
        return out
    return wrapper


def _init_wrapper(name: str, original):
    """A torch.nn.init random initialiser: when the user's code fills a tensor that is not an
    nn.Parameter with it (weights drawn for a plain tensor), the checks that listen get the tensor, the
    initialiser's name and the caller's file:line. torch's own layers call these on their Parameters
    while they are built: one type test per call."""
    @functools.wraps(original)
    def wrapper(tensor, *args, **kwargs):
        out = original(tensor, *args, **kwargs)
        s = _active
        if s is not None and type(tensor) is torch.Tensor and s.random_init_watched and not s.stopped:
            code = sys._getframe(1).f_code
            if not library_file(code.co_filename):
                _guard(s, name, s.random_init_call, tensor, name, user_site(depth=2))
        return out
    return wrapper


def _no_grad_wrapper(original, entering: bool):
    """torch.no_grad's __enter__ / __exit__: on a sampled step, a block of the user's code entered
    while grad was enabled reaches the checks that listen with the caller's frame, at its start
    and, before grad comes back, at its end; otherwise one attribute test per block."""
    @functools.wraps(original)
    def wrapper(self, *args):
        s = _active
        if s is not None and s.sampled and s.no_grad_watched and not s.stopped \
                and (torch.is_grad_enabled() if entering else getattr(self, "prev", False)):
            caller = sys._getframe(1)
            if not library_file(caller.f_code.co_filename):
                _guard(s, "no_grad", s.no_grad_block, caller, entering)
        return original(self, *args)
    return wrapper


def _spread_wrapper(name: str, original):
    """torch.std and its kin: tell the session when a reduction had one element per output value
    (with the default correction=1 that is 0/0, NaN); otherwise one shape test per call."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        s = _active
        if s is not None and not s.stopped and s.spread_watched:
            source = args[0] if args else kwargs.get("input")
            result = out[0] if isinstance(out, tuple) else out
            if isinstance(source, torch.Tensor) and isinstance(result, torch.Tensor) \
                    and 0 < source.numel() <= result.numel():
                _guard(s, name, s.spread_call, name, source, result)
        return out
    return wrapper


def _log_wrapper(name: str, original):
    """torch.log, log1p, log_softmax and logsumexp (and the Tensor methods): on a sampled step a result
    that requires grad reaches the checks that listen (a GAN loss written as log(1 - D(G(z))) calls no
    loss function; a policy normalises its logits by hand); otherwise one attribute test per call."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        s = _active
        if s is not None and s.sampled and s.log_watched and not s.in_loss and not s.stopped \
                and isinstance(out, torch.Tensor) and out.requires_grad:
            source = args[0] if args else kwargs.get("input")
            if isinstance(source, torch.Tensor):
                _guard(s, name, s.log_call, name, source, out)
        return out
    return wrapper


def _log_prob_wrapper(original):
    """A torch.distributions class's log_prob: on a sampled step, while a check listens, the
    distribution, the value scored and the result reach the checks (an NLL written as
    -Normal(mu, sigma).log_prob(y) calls no loss function); otherwise one attribute test per call."""
    @functools.wraps(original)
    def wrapper(self, value, *args, **kwargs):
        out = original(self, value, *args, **kwargs)
        s = _active
        if s is not None and s.sampled and s.log_prob_watched and not s.stopped \
                and isinstance(value, torch.Tensor) and isinstance(out, torch.Tensor):
            _guard(s, "log_prob", s.log_prob_call, self, value, out, user_site(depth=2))
        return out
    return wrapper


def _distribution_classes() -> list:
    """The classes of torch.distributions that define their own log_prob."""
    import torch.distributions as distributions
    return [c for c in vars(distributions).values() if isinstance(c, type)
            and issubclass(c, distributions.Distribution) and "log_prob" in c.__dict__]


def _reshape_wrapper(name: str, original):
    """Tensor.view / reshape and torch.reshape: on a sampled step, while a check listens, a result of
    another shape (same dtype) reaches the checks as two shapes; otherwise one attribute test per call."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        s = _active
        if s is not None and s.sampled and s.reshape_watched and not s.stopped:
            source = args[0] if args else kwargs.get("input")
            if isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor) and out.shape != source.shape \
                    and out.dtype == source.dtype:
                _guard(s, name, s.reshape_call, name, source.shape, out.shape)
        return out
    return wrapper


def _grad_tensors(data, found: list, budget: int) -> int:
    """Append to `found` the tensors that require grad in `data` (a tensor, or a list or tuple of them,
    nested), looking at `budget` items at most; a list whose item is a number is taken for a list of
    numbers (rows of data read by a Dataset cost one test). Returns the budget left."""
    if isinstance(data, torch.Tensor):
        if data.requires_grad:
            found.append(data)
    elif isinstance(data, (list, tuple)):
        for item in data:
            if budget <= 0 or isinstance(item, (float, int)):
                break
            budget = _grad_tensors(item, found, budget - 1)
    return budget - 1


def _copy_wrapper(name: str, original):
    """torch.tensor / torch.as_tensor: on a sampled step with grad enabled, data holding tensors that
    require grad reaches the checks (their values are copied without their graph: a loss term copied
    so trains nothing); otherwise one attribute test per call. torch.as_tensor of a tensor returns
    that tensor, graph and all, and is passed over."""
    lists_only = name == "as_tensor"

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        s = _active
        if s is not None and s.sampled and not s.stopped and torch.is_grad_enabled():
            data = args[0] if args else kwargs.get("data")
            if isinstance(data, (list, tuple)) or (not lists_only and isinstance(data, torch.Tensor)):
                found: list = []
                _grad_tensors(data, found, COPY_SCAN)
                if found and not caller_is_torch(depth=2):
                    _guard(s, name, s.dispatch, "on_tensor_copy", name, found, out, user_site(depth=2))
        return out
    return wrapper


def _index_wrapper(name: str, original):
    """torch.argmax / argmin, torch.max / min along a dim (their `indices`), and the Tensor methods: on
    a sampled step with grad enabled, indices taken from a tensor with a graph reach the checks as a
    copy without gradient (a loss term built from them trains nothing); otherwise one attribute test
    per call."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        s = _active
        if s is not None and s.sampled and not s.stopped and torch.is_grad_enabled():
            source = args[0] if args else kwargs.get("input")
            indices = getattr(out, "indices", out) if name in ("max", "min") else out
            if isinstance(source, torch.Tensor) and source.grad_fn is not None and isinstance(indices, torch.Tensor) \
                    and indices.dtype == torch.int64 and not caller_is_torch(depth=2):
                _guard(s, name, s.dispatch, "on_tensor_copy", name, [source], indices, user_site(depth=2))
        return out
    return wrapper


def _loss_wrapper(kind: str, original):
    parameters = inspect.signature(original).parameters
    names = list(parameters)
    defaults = {n: p.default for n, p in parameters.items() if p.default is not inspect.Parameter.empty}

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        s = _active
        if s is None or s.in_loss or s.stopped:
            return original(*args, **kwargs)
        evaluation = not s.sampled
        if evaluation and not s.take_evaluation_loss():
            return original(*args, **kwargs)

        def begin():
            options = dict(defaults)  # the arguments by name, as inspect's bind would give them, faster
            options.update(zip(names, args))
            options.update(kwargs)
            _legacy_reduction(options)
            return s.loss_call(kind, options, evaluation)
        call = _guard(s, f"{kind} input", begin)
        s.in_loss = True
        try:
            output = original(*args, **kwargs)
        finally:
            s.in_loss = False
        if call is not None:
            _guard(s, kind, s.loss_returned, call, output)
        return output
    wrapper.__kb_watch_original__ = original  # type: ignore[attr-defined]
    return wrapper


class ModelHook:
    """The forward pre hook (and post hook) each watched model gets (it calls the session's). Module.__getstate__
    leaves it out while watching, so a model saved whole (torch.save(model), then loaded with
    weights_only and the user's safe globals) or deep-copied carries no trace of kb watch; a
    module class whose own __getstate__ skips Module's pickles it as sys.audit with a fixed event
    name, a no-op that refers to no session and no kb_tools."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, module, *args):  # (args) before the forward, (args, output) after it
        return self.fn(module, *args)

    def __reduce__(self):
        return (functools.partial, (sys.audit, "watch.detached_model_hook"))

    def __deepcopy__(self, memo):
        return self


def _getstate_without_model_hooks(original):
    """Module.__getstate__ whose state has no ModelHook among the forward pre hooks and forward hooks."""
    @functools.wraps(original)
    def __getstate__(self):
        state = original(self)
        if not isinstance(state, dict):
            return state
        for key in ("_forward_pre_hooks", "_forward_hooks"):
            hooks = state.get(key)
            if hooks and any(isinstance(h, ModelHook) for h in hooks.values()):
                state = dict(state)
                state[key] = type(hooks)((k, h) for k, h in hooks.items() if not isinstance(h, ModelHook))
        return state
    return __getstate__


class Instrumentation:
    """The hooks and attribute swaps of one session; install() and uninstall() may alternate."""

    def __init__(self, session):
        self.session = session
        self._patches = []          # (owner, name, previous value or _MISSING)
        self._step_handles = []
        self._forward_handles = []
        self._scripting = 0          # nesting of torch.jit.script calls running with the originals
        self._scheduler_classes: set = set()  # scheduler classes whose load_state_dict is wrapped
        self.installed = False

    # ------------------------------------------------------------ plumbing

    def _patch(self, owner, name: str, value) -> None:
        self._patches.append((owner, name, owner.__dict__.get(name, _MISSING) if isinstance(owner, type)
                              else getattr(owner, name, _MISSING)))
        setattr(owner, name, value)

    def watch_scheduler_class(self, cls) -> None:
        """Wrap load_state_dict of this scheduler class (the first time one of its schedulers is
        created while installed): the closed-form schedulers override it without calling the base."""
        if cls in self._scheduler_classes or not self.installed:
            return
        self._scheduler_classes.add(cls)
        original = getattr(cls, "load_state_dict", None)
        if callable(original):
            self._patch(cls, "load_state_dict", _scheduler_load_wrapper(original))

    def install(self) -> None:
        global _active
        if self.installed:
            return
        if _active is not None and _active is not self.session:
            raise RuntimeError("kb watch is already watching this process")
        _active = self.session
        try:
            self._install()
        except BaseException:
            self.uninstall()
            raise
        self.installed = True

    def _install(self) -> None:
        session = self.session
        for name in LOSS_FUNCTIONS:
            original = getattr(F, name, None)
            if original is not None:
                self._patch(F, name, _loss_wrapper(name, original))
        for name in ("dropout", "dropout1d", "dropout2d", "dropout3d"):
            if getattr(F, name, None) is not None:
                self._patch(F, name, _dropout_wrapper(getattr(F, name)))
        if getattr(F, "scaled_dot_product_attention", None) is not None:
            self._patch(F, "scaled_dot_product_attention", _attention_dropout_wrapper(F.scaled_dot_product_attention))
        self._patch(torch, "bernoulli", _bernoulli_wrapper("bernoulli", torch.bernoulli))
        for name in ("bernoulli", "bernoulli_"):
            self._patch(torch.Tensor, name, _bernoulli_wrapper(name, getattr(torch.Tensor, name)))
        no_grad = torch.autograd.grad_mode.no_grad
        self._patch(no_grad, "__enter__", _no_grad_wrapper(no_grad.__enter__, True))
        self._patch(no_grad, "__exit__", _no_grad_wrapper(no_grad.__exit__, False))
        for name in ("rand", "rand_like"):
            self._patch(torch, name, _uniform_wrapper(name, getattr(torch, name)))
        self._patch(torch.Tensor, "uniform_", _uniform_wrapper("uniform_", torch.Tensor.uniform_))
        for name in RANDOM_INITS:
            self._patch(torch.nn.init, name, _init_wrapper(name, getattr(torch.nn.init, name)))
        for name in SPREAD_FUNCTIONS:
            self._patch(torch, name, _spread_wrapper(name, getattr(torch, name)))
        for name in ("std", "var"):
            self._patch(torch.Tensor, name, _spread_wrapper(name, getattr(torch.Tensor, name)))
        for name in LOG_FUNCTIONS:
            self._patch(torch, name, _log_wrapper(name, getattr(torch, name)))
            self._patch(torch.Tensor, name, _log_wrapper(name, getattr(torch.Tensor, name)))
        for name in RESHAPE_METHODS:
            self._patch(torch.Tensor, name, _reshape_wrapper(name, getattr(torch.Tensor, name)))
        self._patch(torch, "reshape", _reshape_wrapper("reshape", torch.reshape))
        for cls in _distribution_classes():
            self._patch(cls, "log_prob", _log_prob_wrapper(cls.__dict__["log_prob"]))
        if any(overridden(check, "on_tensor_copy") for check in session.checks):
            for name in COPY_FUNCTIONS:
                self._patch(torch, name, _copy_wrapper(name, getattr(torch, name)))
            for name in INDEX_FUNCTIONS:
                self._patch(torch, name, _index_wrapper(name, getattr(torch, name)))
                self._patch(torch.Tensor, name, _index_wrapper(name, getattr(torch.Tensor, name)))
        self._patch(torch.autograd, "backward", _backward_wrapper(torch.autograd.backward))
        self._patch(torch.autograd, "grad", _autograd_grad_wrapper(torch.autograd.grad))
        self._patch(torch.nn.Module, "__init__", _site_recorder(torch.nn.Module.__init__, "module"))
        self._patch(torch.optim.Optimizer, "__init__", _site_recorder(torch.optim.Optimizer.__init__, "optimizer"))
        self._patch(lr_scheduler.LRScheduler, "__init__",
                    _site_recorder(lr_scheduler.LRScheduler.__init__, "scheduler"))
        self._patch(dataloader.DataLoader, "__init__", _site_recorder(dataloader.DataLoader.__init__, "loader"))
        self._patch(grad_scaler.GradScaler, "__init__", _site_recorder(grad_scaler.GradScaler.__init__, "scaler"))
        clip = _clip_wrapper(clip_grad.clip_grad_norm_)
        self._patch(clip_grad, "clip_grad_norm_", clip)
        self._patch(torch.nn.utils, "clip_grad_norm_", clip)
        clip_value = _clip_wrapper(clip_grad.clip_grad_value_, "value")
        self._patch(clip_grad, "clip_grad_value_", clip_value)
        self._patch(torch.nn.utils, "clip_grad_value_", clip_value)
        self._patch(dataloader.DataLoader, "__iter__", _loader_iter(dataloader.DataLoader.__iter__))
        self._patch(dataloader._BaseDataLoaderIter, "__next__", _loader_next(dataloader._BaseDataLoaderIter.__next__))
        self._patch(loss_modules._Loss, "__call__", _loss_module_call)
        self._patch(torch.nn.Module, "__getstate__", _getstate_without_model_hooks(torch.nn.Module.__getstate__))
        self._patch(torch.nn.Module, "load_state_dict", _load_state_dict_wrapper(torch.nn.Module.load_state_dict))
        self._patch(torch.optim.Optimizer, "load_state_dict",
                    _optimizer_load_wrapper(torch.optim.Optimizer.load_state_dict))
        self._patch(torch.nn.Module, "train", _train_wrapper(torch.nn.Module.train))
        self._patch(torch.jit, "script", _script_wrapper(torch.jit.script, self))
        from torch.utils import checkpoint as checkpointing
        self._patch(checkpointing, "checkpoint", _checkpoint_wrapper(checkpointing.checkpoint))

        def step_pre(opt, args, kwargs):
            _guard(session, "step pre hook", session.on_step_pre, opt)

        def step_post(opt, args, kwargs):
            _guard(session, "step post hook", session.on_step_post, opt)
        self._step_handles = [register_optimizer_step_pre_hook(step_pre),
                              register_optimizer_step_post_hook(step_post)]
        if session.sampled and not session.stopped:
            self.forward_hooks(True)

    def uninstall(self, keep_step_hooks: bool = False) -> None:
        """Undo everything (the step hooks too, unless torch is iterating over them right now)."""
        global _active
        self.forward_hooks(False)
        for owner, name, previous in reversed(self._patches):
            if previous is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, previous)
        self._patches = []
        self._scheduler_classes = set()
        if keep_step_hooks:
            return
        for handle in self._step_handles:
            handle.remove()
        self._step_handles = []
        self.installed = False
        if _active is self.session:
            _active = None

    @contextlib.contextmanager
    def originals(self):
        """torch's own functions back in place of the wrappers (torch.jit.script compiles a wrapped
        F.dropout or torch.std from the wrapper's module and fails); the wrappers return after."""
        self._scripting += 1
        swapped = []
        if self._scripting == 1:
            for owner, name, previous in self._patches:
                if owner in (F, torch, torch.Tensor):
                    swapped.append((owner, name, getattr(owner, name)))
                    if previous is _MISSING:
                        delattr(owner, name)
                    else:
                        setattr(owner, name, previous)
        try:
            yield
        finally:
            self._scripting -= 1
            for owner, name, wrapper in swapped:
                setattr(owner, name, wrapper)

    def forward_hooks(self, on: bool) -> None:
        """The global module hooks, present only while a sampled step runs."""
        if on and not self._forward_handles:
            self.session.depth = 0
            self._forward_handles = [register_module_forward_pre_hook(_forward_pre),
                                     register_module_forward_hook(_forward_post, always_call=True)]
        elif not on and self._forward_handles:
            for handle in self._forward_handles:
                handle.remove()
            self._forward_handles = []


# ---------------------------------------------------------------- the hooks themselves

def _forward_pre(module, args):
    s = _active
    if s is None:
        return
    if s.depth == 0:
        _guard(s, "forward pre hook", s.root_call, module, args)
    s.depth += 1
    _guard(s, "forward pre hook", s.module_input, module, args)


def _forward_post(module, args, output):
    s = _active
    if s is None:
        return
    if s.depth > 0:
        s.depth -= 1
    _guard(s, "forward hook", s.module_forward, module, output)


def _backward_wrapper(original):
    @functools.wraps(original)
    def backward(*args, **kwargs):
        s = _active
        if s is None or s.in_backward or s.stopped:
            return original(*args, **kwargs)
        tensors = args[0] if args else kwargs.get("tensors")
        seq = (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors or ())
        _guard(s, "before backward", s.before_backward, seq)
        s.in_backward = True
        try:
            result = original(*args, **kwargs)
        finally:
            s.in_backward = False
        _guard(s, "after backward", s.after_backward, seq)
        return result
    return backward


def _autograd_grad_wrapper(original):
    """torch.autograd.grad: on a sampled step, a call with create_graph=True (its result feeds a
    loss: forces from an energy, a gradient penalty) reaches the checks that listen, with what it
    returned, and so does one without it made with grad enabled (a result that cannot train);
    otherwise one attribute test per call."""
    @functools.wraps(original)
    def grad(*args, **kwargs):
        result = original(*args, **kwargs)
        s = _active
        if s is not None and s.sampled and not s.stopped:
            create_graph = kwargs.get("create_graph", args[4] if len(args) > 4 else False)
            outputs = args[0] if args else kwargs.get("outputs")
            if create_graph and s.autograd_grad_watched:
                _guard(s, "autograd.grad", s.autograd_grad_call, outputs, result, user_site(depth=2))
            elif not create_graph and s.plain_autograd_grad_watched and torch.is_grad_enabled():
                _guard(s, "autograd.grad", s.plain_autograd_grad_call, outputs, result, user_site(depth=2))
        return result
    return grad


def _script_wrapper(original, instrumentation):
    """torch.jit.script, run with torch's own functions in place: scripted code calls the compiled
    ops (unwatched), as it would without kb watch."""
    @functools.wraps(original)
    def script(*args, **kwargs):
        with instrumentation.originals():
            return original(*args, **kwargs)
    return script


def _checkpoint_wrapper(original):
    """torch.utils.checkpoint.checkpoint: on sampled steps, tell the session about a reentrant call
    (use_reentrant not False) made with grad enabled whose tensor inputs all lack requires_grad."""
    @functools.wraps(original)
    def checkpoint(function, *args, **kwargs):
        s = _active
        if s is not None and s.sampled and not s.stopped and kwargs.get("use_reentrant") is not False \
                and torch.is_grad_enabled() \
                and not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            _guard(s, "checkpoint", s.checkpoint_call, function, user_site(depth=2))
        return original(function, *args, **kwargs)
    return checkpoint


def _load_state_dict_wrapper(original):
    """Module.load_state_dict: the session hears the module, whether it was strict, the keys the call
    reported missing and unexpected, and where the user's code called it."""
    @functools.wraps(original)
    def load_state_dict(self, state_dict, strict=True, *args, **kwargs):
        result = original(self, state_dict, strict, *args, **kwargs)
        s = _active
        if s is not None and not s.stopped:
            _guard(s, "load_state_dict", s.state_dict_loaded, self, strict, result, user_site(depth=2))
        return result
    return load_state_dict


def _optimizer_load_wrapper(original):
    """Optimizer.load_state_dict: the session hears the optimizer once its groups and state are the
    checkpoint's, and where the user's code called it (a resumed run)."""
    @functools.wraps(original)
    def load_state_dict(self, state_dict, *args, **kwargs):
        result = original(self, state_dict, *args, **kwargs)
        s = _active
        if s is not None and not s.stopped:
            _guard(s, "optimizer load_state_dict", s.optimizer_state_loaded, self, user_site(depth=2))
        return result
    return load_state_dict


def _scheduler_load_wrapper(original):
    """A scheduler class's load_state_dict: the step count the session keeps for the scheduler
    (last_epoch since it was created) is carried over the last_epoch the checkpoint sets, so a
    resumed schedule's steps are not read as steps it took in this run."""
    @functools.wraps(original)
    def load_state_dict(self, *args, **kwargs):
        s = _active
        info = s.scheduler_info(self) if s is not None else None
        taken = info.steps() if info is not None else None
        result = original(self, *args, **kwargs)
        if info is not None and taken is not None:
            info.rebase(taken)
        return result
    return load_state_dict


def _train_wrapper(original):
    """Module.train (eval() calls it, and it calls each child's): the session records the module as
    one whose mode was set (a layer that no such call ever reached keeps the mode it was built with)."""
    @functools.wraps(original)
    def train(self, mode=True):
        s = _active
        if s is not None and not s.stopped:
            try:
                s.modes_set.add(self)
            except TypeError:  # a module class that made itself unhashable
                pass
        return original(self, mode)
    return train


def _site_recorder(original, kind: str):
    """The constructor `original`, which also records where the user's code created the object."""
    @functools.wraps(original)
    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        s = _active
        if s is not None:
            _guard(s, f"{kind} site", _record, s, kind, self)
    return init


def _record(session, kind: str, obj) -> None:
    site = user_site(depth=3, constructing=obj)
    if kind == "module":
        session.module_sites[obj] = site
    elif kind == "optimizer":
        session.add_optimizer(obj, site)
    elif kind == "scheduler":
        session.add_scheduler(obj, site)
        if session.instrumentation is not None:
            session.instrumentation.watch_scheduler_class(type(obj))
    elif kind == "scaler":
        session.add_scaler(obj, site)
    else:
        session.add_loader(obj, site)


def _clip_wrapper(original, kind: str = "norm"):
    """clip_grad_norm_ (or clip_grad_value_, kind "value"), which also tells the session what it
    clipped (on sampled steps): the parameters, the threshold and, for the norm, what it measured.
    The arguments are passed on as given (by position or by name: max_norm, clip_value)."""
    threshold_name = "max_norm" if kind == "norm" else "clip_value"

    @functools.wraps(original)
    def clip(*args, **kwargs):
        s = _active
        if s is None or not s.sampled or s.stopped:
            return original(*args, **kwargs)
        args = list(args)
        parameters = args[0] if args else kwargs.get("parameters")
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        if args:
            args[0] = params
        else:
            kwargs["parameters"] = params
        threshold = args[1] if len(args) > 1 else kwargs.get(threshold_name)
        site = user_site(depth=2)
        result = original(*args, **kwargs)
        _guard(s, original.__name__, s.clip_call, params, threshold, result if kind == "norm" else None, site, kind)
        return result
    clip.__kb_watch_original__ = original  # type: ignore[attr-defined]
    return clip


_ITERATORS = itertools.count()  # serial numbers of DataLoader iterators (an id can be reused once one is dropped)


def _loader_iter(original):
    @functools.wraps(original)
    def __iter__(self):
        iterator = original(self)
        try:
            iterator._kb_watch_loader = self
            iterator._kb_watch_serial = next(_ITERATORS)
        except AttributeError:
            pass
        return iterator
    return __iter__


def _loader_next(original):
    @functools.wraps(original)
    def __next__(self):
        s = _active
        if s is not None and s.pass_state is not None and s.cuts(getattr(self, "_kb_watch_serial", None),
                                                                getattr(self, "_kb_watch_loader", None),
                                                                getattr(self, "_kb_watch_given", 0)):
            raise StopIteration  # after --steps: this epoch (or pass) ends here (Session.cuts)
        batch = original(self)
        if s is not None and not s.stopped:
            try:
                self._kb_watch_given = getattr(self, "_kb_watch_given", 0) + 1
            except AttributeError:
                pass
            _guard(s, "batch", s.batch, getattr(self, "_kb_watch_loader", None), batch,
                   getattr(self, "_kb_watch_serial", None))
        return batch
    return __next__


_module_call = torch.nn.Module.__call__


def _loss_module_call(self, *args, **kwargs):
    """An nn loss module's call: tells the loss wrappers which module is calling them."""
    s = _active
    if s is None:
        return _module_call(self, *args, **kwargs)
    previous, s.current_loss_module = s.current_loss_module, self
    try:
        return _module_call(self, *args, **kwargs)
    finally:
        s.current_loss_module = previous
