"""What it finds: a model whose parameters are cast to float16 (`.half()`, `.to(torch.float16)`)
and trained with an Adam-family optimizer, in a file with no autocast.

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
MESSAGE = ("the model's parameters are cast to float16 and trained with {opt}: its eps and second moment underflow "
           "in fp16; keep fp32 weights and use autocast")


def check(a, emit):
    def to_fp16(c):
        return (method_call(c, "half") is not None and not c.args) or (method_call(c, "to") is not None and any(
            a.imp.canon(arg) == "torch.float16" for arg in list(c.args) + [k.value for k in c.keywords]))
    calls = a.index.calls
    casted = {method_call(c, "half", "to") for c in calls if to_fp16(c)} - {""}
    for node in a.index.of(ast.Assign):   # model = Net().cuda().half(): the name bound to the cast result
        if isinstance(node.value, ast.Call) and to_fp16(node.value):
            casted.update(dotted(t) for t in node.targets if dotted(t))
    if not casted or any((a.imp.canon(c.func) or "").endswith("autocast") for c in calls):
        return
    for c in calls:
        name = a.imp.canon(c.func)
        if name in ADAM and c.args and method_call(c.args[0], "parameters") in casted:
            emit(c, CODE, opt=name.rsplit(".", 1)[-1])
