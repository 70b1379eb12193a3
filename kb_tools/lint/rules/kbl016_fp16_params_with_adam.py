"""What it finds: a model whose parameters are cast to float16 (`.half()`, `.to(torch.float16)`)
and trained with an Adam-family optimizer (its parameters followed through `filter()`, lists and
param groups; the class also through a name it is bound to, `opt_cls = optim.Adam`), in a file
with no autocast; or, in such a file, any Adam-family optimizer when the file makes float16 the
default for new tensors
(`torch.set_default_dtype(torch.float16)`, `torch.set_default_tensor_type(torch.HalfTensor)`).

Why it hurts training: in fp16, Adam's eps (1e-8) underflows to zero and its second moment to
denormals, so updates become inf/NaN or vanish; small updates are also rounded away against
fp16 weights. Mixed precision keeps fp32 weights and casts only the computation.

Example:
    model = Net().cuda().half()
    opt = torch.optim.Adam(model.parameters())

Use instead:
    model = Net().cuda()
    opt = torch.optim.Adam(model.parameters())
    with torch.autocast("cuda", dtype=torch.float16): loss = ...
"""
import ast

from kb_tools.lint.analysis import ADAM, dotted, method_call

CODE, NAME, ENTRY = "KBL016", "fp16-params-with-adam", "adam-eps-low-precision"
MESSAGE = ("the model's parameters are {how} and trained with {opt}: its eps and second moment underflow "
           "in fp16; keep fp32 weights and use autocast")
DEFAULT_SETTERS = {"torch.set_default_dtype", "torch.set_default_tensor_type"}
HALF = {"torch.float16", "torch.half", "torch.HalfTensor", "torch.cuda.HalfTensor"}


def _half_by_default(a, call) -> bool:
    """torch.set_default_dtype(torch.float16) or set_default_tensor_type(torch.HalfTensor), or its string form."""
    if a.imp.canon(call.func) not in DEFAULT_SETTERS or not call.args:
        return False
    arg = call.args[0]
    return a.imp.canon(arg) in HALF or (isinstance(arg, ast.Constant) and arg.value in HALF)


def check(a, emit):
    def to_fp16(c):
        return (method_call(c, "half") is not None and not c.args) or (method_call(c, "to") is not None and any(
            a.imp.canon(arg) in ("torch.float16", "torch.half") for arg in list(c.args) + [k.value for k in c.keywords]))

    def adam_family(c) -> str | None:
        """The Adam-family class a call builds: `torch.optim.Adam(...)`, or `opt_cls(...)` after
        `opt_cls = optim.Adam` (any assignment of the name in the file)."""
        name = a.imp.canon(c.func)
        if name in ADAM:
            return name
        held = [a.imp.canon(v) for _, v, _ in a.history.get(dotted(c.func) or "", [])]
        return next((h for h in held if h in ADAM), None)
    calls = a.index.calls
    casted = {method_call(c, "half", "to") for c in calls if to_fp16(c)} - {""}
    for node in a.index.of(ast.Assign):   # model = Net().cuda().half(): the name bound to the cast result
        if isinstance(node.value, ast.Call) and to_fp16(node.value):
            casted.update(dotted(t) for t in node.targets if dotted(t))
    half_default = any(_half_by_default(a, c) for c in calls)
    if not (casted or half_default) or any((a.imp.canon(c.func) or "").endswith("autocast") for c in calls):
        return
    for c in calls:
        name = adam_family(c)
        if name and set(a.parameter_owners(c)) & casted:
            emit(c, CODE, opt=name.rsplit(".", 1)[-1], how="cast to float16")
        elif name and c.args and half_default:
            emit(c, CODE, opt=name.rsplit(".", 1)[-1], how="float16 by default (the file sets the default dtype)")
