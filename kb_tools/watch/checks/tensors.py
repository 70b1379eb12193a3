"""Helpers the checks share: the rows of class scores a classification loss received, the total
norm of many gradients, and the first tensor of a batch with a cheap fingerprint to compare batches by."""
from __future__ import annotations

import itertools
import math

import torch

MAX_ROWS = 4096  # rows examined per call: enough to decide, cheap on any batch
ELEMENTS = 8     # strided elements in a batch fingerprint


def class_rows(call, classes_last: bool = False):
    """The input of a cross_entropy / nll_loss call as (rows, C): one row of C class scores per
    sample (the class dimension is 1, or 0 for an unbatched input; the last one with `classes_last`,
    as ctc_loss's (T, N, C) takes them), without rows whose target is ignore_index; None when the
    input is not a float tensor with at least 2 classes."""
    x = call.input
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() == 0 or x.numel() == 0:
        return None
    x = x.detach()
    class_dim = -1 if classes_last else 1 if x.dim() >= 2 else 0
    classes = x.shape[class_dim]
    if classes < 2:
        return None
    rows = x.movedim(class_dim, -1).reshape(-1, classes)
    target = call.target
    ignore = call.options.get("ignore_index", -100)
    if not classes_last and isinstance(target, torch.Tensor) and not target.is_floating_point() \
            and target.numel() == rows.shape[0]:
        keep = target.reshape(-1) != ignore
        if not bool(keep.all()):
            rows = rows[keep]
    return rows[:MAX_ROWS].float(), classes


def token_targets(call):
    """The integer class-index targets of a cross_entropy / nll_loss call, with at least one
    dimension (token ids, tags), or None: the targets the padding and masking checks compare."""
    y = call.target
    if call.kind not in ("cross_entropy", "nll_loss") or not isinstance(y, torch.Tensor) or y.is_floating_point() \
            or y.is_complex() or y.dim() == 0:
        return None
    return y


def are_probabilities(rows, tol: float = 1e-3) -> bool:
    """Every row in [0, 1] and summing to 1 within `tol`: already a softmax."""
    if rows.numel() == 0:
        return False
    low, high, off = torch.stack([rows.min(), rows.max(), (rows.sum(-1) - 1).abs().max()]).tolist()
    return low >= 0 and high <= 1 and off <= tol


def probability_target_rows(call):
    """The target of a cross_entropy call in class-probability form (floats of the input's shape)
    as one row of C values per sample, float32; None for class-index targets or other shapes."""
    x, y = call.input, call.target
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or not y.is_floating_point() \
            or y.shape != x.shape or y.dim() < 2 or y.numel() == 0:
        return None
    return y.detach().float().movedim(1, -1).reshape(-1, y.shape[1])


def mse_target_stats(call):
    """(loss, mean square, variance) of the targets of a mean-reduced mse_loss call, in float64;
    None for another loss, reduction or target."""
    y, out = call.target, call.output
    if call.kind != "mse_loss" or call.reduction != "mean" or not isinstance(y, torch.Tensor) \
            or not y.is_floating_point() or y.numel() < 2 or not isinstance(out, torch.Tensor) or out.numel() != 1:
        return None
    y = y.detach().double()
    return float(out.detach()), float((y * y).mean()), float(y.var())


def log_probability_share(rows, tol: float = 1e-2) -> float:
    """The share of rows that are log-probabilities: logsumexp within `tol` of 0."""
    if rows.numel() == 0:
        return 1.0
    return float(((torch.logsumexp(rows, dim=-1)).abs() <= tol).float().mean())


def iter_tensors(value, depth: int = 0):
    """The tensors of a batch in order: a tensor, or tuples, lists and dicts holding them (3 levels
    deep, the first 16 items of each)."""
    if isinstance(value, torch.Tensor):
        yield value
        return
    if depth > 3:
        return
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value[:16]:
            yield from iter_tensors(item, depth + 1)


def first_tensor(value, depth: int = 0):
    """The first tensor of a batch (a tensor, or a tuple, list or dict holding one)."""
    return next(iter_tensors(value, depth), None)


def fingerprint(t: torch.Tensor) -> tuple | None:
    """(shape, dtype, sum, a few strided elements): equal for equal tensors, cheap for any size."""
    if t.numel() == 0 or t.is_complex() or t.is_sparse:
        return None
    flat = t.detach().reshape(-1)
    stride = max(1, flat.numel() // ELEMENTS)
    values = torch.cat([_sum_as_double(flat).reshape(1), flat[::stride][:ELEMENTS].double()]).tolist()
    return (tuple(t.shape), str(t.dtype), tuple(values))


SUM_BLOCK = 4096  # elements summed in the tensor's own dtype before the float64 total


def _sum_as_double(flat: torch.Tensor) -> torch.Tensor:
    """The sum of a 1-d tensor in float64 without a float64 copy of it (a batch-sized allocation on
    every call unsettles the C allocator of a CPU run: its heap is trimmed and faulted in again):
    float32, float64 and integer tensors are summed in blocks in their own dtype first, each block
    in one fixed order, so equal tensors give equal sums."""
    n = flat.numel()
    blockwise = flat.dtype in (torch.float32, torch.float64) or not (flat.is_floating_point() or flat.dtype == torch.bool)
    if n <= SUM_BLOCK or not blockwise:  # small, or half precision and bool: summed as before
        return flat.double().sum()
    whole = n - n % SUM_BLOCK
    blocks = flat[:whole].view(-1, SUM_BLOCK).sum(1).double().sum()
    return blocks + flat[whole:].double().sum() if whole < n else blocks


ROW_COLUMNS = 256   # strided elements of a row that its fingerprint reads
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
_row_weights: dict = {}


def row_fingerprints(t: torch.Tensor, min_columns: int = 8) -> list | None:
    """One integer per row (first dimension) of `t`, equal for rows with equal values: up to ROW_COLUMNS
    strided elements, read as their bit patterns, times fixed odd weights, summed in int64 (integer
    sums wrap the same way in any order, so a row gets the same number in any batch, on any device).
    None for a tensor of fewer than 2 rows or fewer than `min_columns` elements per row."""
    if t.dim() < 2 or t.shape[0] < 2 or t.is_complex() or t.is_sparse:
        return None
    rows = t.detach().reshape(t.shape[0], -1)
    if rows.shape[1] < min_columns:
        return None
    if rows.shape[1] > ROW_COLUMNS:
        rows = rows[:, ::rows.shape[1] // ROW_COLUMNS][:, :ROW_COLUMNS]
    if rows.is_floating_point():
        bits = _BITS.get(rows.dtype)
        if bits is None:
            return None
        rows = rows.contiguous().view(bits)
    rows = rows.to(torch.int64)
    key = (rows.shape[1], rows.device)
    weights = _row_weights.get(key)
    if weights is None:
        g = torch.Generator().manual_seed(rows.shape[1])
        weights = (torch.randint(1, 2 ** 62, (rows.shape[1],), generator=g, dtype=torch.int64, device="cpu") * 2
                   + 1).to(rows.device)
        if len(_row_weights) < 64:
            _row_weights[key] = weights
    return (rows * weights).sum(1).tolist()


def graph_nodes(tensors, max_nodes: int = 20_000):
    """The autograd nodes behind `tensors`, each once, depth first, at most `max_nodes` of them."""
    return nodes_from([t.grad_fn for t in tensors if getattr(t, "grad_fn", None) is not None], max_nodes)


def nodes_from(starts: list, max_nodes: int = 20_000):
    """The autograd nodes reachable from the nodes `starts` (grad_fn objects), as graph_nodes.
    The nodes seen are kept alive until the walk ends: torch 2.11 makes a new Python object for a
    node each time next_functions is read, so a freed one's id() would be reused by another node,
    which the walk would then skip."""
    seen: dict = {}
    stack = list(starts)
    while stack and len(seen) < max_nodes:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        yield node
        stack.extend(child for child, _ in getattr(node, "next_functions", ()) if child is not None)


def adds_a_constant(node) -> bool:
    """Is this autograd node an add or subtract one of whose sides carries no gradient
    (`term.detach() + loss`, `torch.tensor(x.item()) + loss`: a term that trains nothing)?"""
    return type(node).__name__.startswith(("AddBackward", "SubBackward")) \
        and any(child is None for child, _ in node.next_functions)


def constant_factor(node, host_only: bool = False) -> tuple | None:
    """("div"|"mul", value) when this autograd node divides or multiplies by a constant number (one
    side carries no gradient), else None. With `host_only`, a constant kept on an accelerator is
    not read (reading it would synchronise the device)."""
    name = node.name()
    nexts = node.next_functions
    try:
        if name == "DivBackward0" and len(nexts) == 2 and nexts[1][0] is None:
            kind, value = "div", node._saved_other
        elif name == "MulBackward0" and len(nexts) == 2 and (nexts[0][0] is None) != (nexts[1][0] is None):
            kind, value = "mul", node._saved_other if nexts[1][0] is None else node._saved_self
        else:
            return None
    except RuntimeError:  # a saved tensor already freed
        return None
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or (host_only and value.device.type != "cpu"):
            return None
        return kind, float(value)
    return (kind, float(value)) if isinstance(value, (int, float)) else None


def graph_leaves(tensors, limit: int, max_nodes: int = 20_000) -> list:
    """The leaf tensors that require grad behind `tensors` (at most `limit`): the variables of the
    graph's AccumulateGrad nodes."""
    return leaves_from([t.grad_fn for t in tensors if getattr(t, "grad_fn", None) is not None], limit, max_nodes)


def leaves_from(starts: list, limit: int, max_nodes: int = 20_000) -> list:
    """graph_leaves from autograd nodes (grad_fn objects) rather than tensors: a check that keeps a
    root's node, not the tensor, until it knows it needs the walk."""
    found = []
    for node in nodes_from(starts, max_nodes):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            found.append(variable)
            if len(found) >= limit:
                break
    return found


def reaches_trained(session, tensor, limit: int = 4096) -> bool:
    """Does this tensor's graph reach a parameter that some optimizer holds (the model's output, not
    an input made to require grad or a parameter updated by hand)?"""
    trained = session.trainable_ids()
    return any(id(leaf) in trained for leaf in graph_leaves([tensor], limit))


def grad_mark(grad) -> tuple | None:
    """(identity, version counter) of a gradient, host-side: changes when a backward() writes it (a new
    tensor, or a newer version) and when anything changes it in place (clipping, an all-reduce by hand);
    None for no gradient. No value is read."""
    return None if grad is None else (id(grad), grad._version)


def value_fingerprint(p) -> tuple:
    """(sum, sum of magnitudes, sum of squares) in float64: changes when any value of `p` changes
    (short of a change that cancels in all three), without keeping a copy."""
    x = p.detach().double()
    return float(x.sum()), float(x.abs().sum()), float((x * x).sum())


def feature_moments(x: torch.Tensor) -> tuple:
    """Per feature (the last axis): the mean and the standard deviation over all other axes, as lists
    (the scale of inputs or targets column by column, kept as plain numbers)."""
    flat = x.detach().double().reshape(-1, x.shape[-1])
    std, mean = torch.std_mean(flat, dim=0)
    return mean.tolist(), std.tolist()


def saved_dim(node) -> int | None:
    """The `dim` a softmax-like autograd node saved, as the signed value given (torch reads a negative
    dim back as unsigned: -1 as 2**64 - 1); None when the node saved none."""
    dim = getattr(node, "_saved_dim", None)
    if not isinstance(dim, int):
        return None
    return dim - (1 << 64) if dim >= 1 << 63 else dim


# autograd nodes that only reshape, select, copy or cast their one input: looked through to the op that
# made a tensor (the sigmoid behind a squeeze, the softmax behind a view, the mean behind an unsqueeze)
VIEW_NODES = frozenset({
    "ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "AliasBackward0", "SqueezeBackward0",
    "SqueezeBackward1", "SqueezeBackward2", "UnsqueezeBackward0", "ExpandBackward0", "SelectBackward0",
    "SliceBackward0", "TBackward0", "PermuteBackward0", "TransposeBackward0", "CloneBackward0", "ToCopyBackward0",
    "FlattenBackward0"})


def skip_view_nodes(node, limit: int = 16):
    """The first autograd node at or behind `node` that is not one of VIEW_NODES (None where the chain
    ends in a tensor that needs no grad)."""
    for _ in range(limit):
        if node is None or node.name() not in VIEW_NODES or not node.next_functions:
            return node
        node = node.next_functions[0][0]
    return node


def leading_values(t: torch.Tensor, n: int) -> torch.Tensor:
    """The first `n` values of `t`, flattened and detached (a view): a bounded sample of a parameter
    to compare before and after an optimizer step, whatever the parameter's size."""
    return t.detach().reshape(-1)[:n]


PAD_ROWS = 64  # rows of an id batch examined for padding


def edge_runs(x: torch.Tensor) -> torch.Tensor:
    """For each row of a 2-D tensor, how many times its first value repeats from the start (>= 1);
    `edge_runs(x.flip(1))` counts the copies of the last value at the end."""
    return (x == x[:, :1]).int().cumprod(1).sum(1)


def padding_runs(ids, min_run: int = 2):
    """Where a batch of token ids [B, T] is padded: (pad id, [(row, start, end), ...]) for the rows
    (of the first PAD_ROWS) that end, or for left padding begin, with a run of at least `min_run`
    copies of one id, the same id in each and in at least half the rows examined; None when the
    ids do not look padded. Padding is a run of one id at one edge of most rows; text ends that way
    only by chance, in a few rows and with a different id each time. Runs of one length opening every
    row (at least 4 rows) are not read as left padding: that is a start token repeated, and padding
    lengths vary with the sequences."""
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point() or ids.is_complex() \
            or ids.shape[1] < 2 * min_run:
        return None
    x = ids.detach()[:PAD_ROWS].cpu()
    rows, width = x.shape
    best = None
    for side in ("right", "left"):
        y = x.flip(1) if side == "right" else x
        run = edge_runs(y)
        padded = run >= min_run
        if int(padded.sum()) < max(2, (rows + 1) // 2):
            continue
        values, counts = y[:, 0][padded].unique(return_counts=True)
        pad = int(values[counts.argmax()])
        chosen = padded & (y[:, 0] == pad)
        if int(chosen.sum()) < max(2, (rows + 1) // 2):
            continue
        lengths = run.tolist()
        picked = chosen.nonzero().flatten().tolist()
        if side == "left" and len(picked) == rows >= 4 and len({lengths[r] for r in picked}) == 1:
            continue  # every row opens with the same short run: a repeated start token, not left padding
        spans = [(r, width - lengths[r], width) if side == "right" else (r, 0, lengths[r]) for r in picked]
        if best is None or sum(e - s for _, s, e in spans) > sum(e - s for _, s, e in best[1]):
            best = (pad, spans)
    return best


def grad_norm_of(tensors) -> float:
    """The 2-norm of all `tensors` together, as a float (inf or nan when one of them is): one
    device synchronisation, whatever the number of tensors; none for tensors in host memory."""
    tensors = list(tensors)
    if all(t.device.type == "cpu" for t in tensors):
        return host_grad_norm(tensors)
    return float(grad_norm_tensor(tensors))


def host_grad_norm(tensors) -> float:
    """grad_norm_of for tensors in host memory: each tensor's norm read at once (no synchronisation
    to save there) and combined in float64. Not torch._foreach_norm: taken on every step of a small
    CNN, it left the watched steps with hundreds more page faults each than plain ones, the CNN's
    overhead above 10% (BENCHMARKS, kb watch, the unsampled steps' gradient norm)."""
    with torch.no_grad():
        total = 0.0
        for t in tensors:
            try:
                norm = torch.linalg.vector_norm(t)
            except (RuntimeError, TypeError, NotImplementedError):  # sparse gradients
                norm = t.norm()
            total += float(norm) ** 2
    return math.sqrt(total)


def grad_norm_tensor(tensors) -> torch.Tensor:
    """The 2-norm of all `tensors` together as a 0-dim float64 tensor, left on the device: no
    synchronisation, for a check that reads it later."""
    with torch.no_grad():  # rather than a detach() per tensor: one op fewer per parameter
        try:
            norms: list | tuple = torch._foreach_norm(list(tensors))
        except (RuntimeError, TypeError, NotImplementedError):  # sparse gradients, unusual devices
            norms = [t.norm() for t in tensors]
        try:
            stacked = torch.stack(norms)
        except RuntimeError:  # mixed devices or dtypes
            stacked = torch.stack([n.to(device=norms[0].device, dtype=torch.float64) for n in norms])
        return torch.linalg.vector_norm(stacked.double())


_PEEK_TRANSFORMS = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)


def inside_function_transform() -> bool:
    """Is torch.func's vmap or grad running (per-sample gradients, DP-SGD)? Its tensors are batched
    stand-ins: reading their values raises, and a check that raised would be switched off."""
    return _PEEK_TRANSFORMS is not None and _PEEK_TRANSFORMS() is not None


def signature(t: torch.Tensor) -> tuple:
    """(element count, sum in float64): equal for a tensor and its copy moved by .to(), cheap to compare."""
    return t.numel(), float(t.detach().double().sum())


def input_signatures(args, limit: int = 4) -> list:
    """The signatures of the first tensors among a model call's arguments."""
    return [signature(t) for t in itertools.islice(iter_tensors(args), limit) if t.numel() and not t.is_complex()]


def fed_to_model(mark: tuple, fed: list) -> bool:
    """Whether a batch tensor with signature `mark` is one the model was fed (an image, not a label
    mask): the same element count and sum, up to the summation order of another device."""
    return any(mark[0] == n and math.isclose(mark[1], total, rel_tol=1e-9, abs_tol=1e-9) for n, total in fed)
