"""What it finds: the output of a softmax (a function, a tensor method, an `nn.Softmax` layer or a
model whose forward ends in one) passed to `cross_entropy` / `CrossEntropyLoss`.

Why it hurts training: cross-entropy applies log_softmax itself, so the loss sees probabilities
as logits: the softmax of values in [0, 1] is nearly uniform, the loss has a floor far above
zero and the gradients shrink, so training crawls or stalls.

Example:
    probs = F.softmax(model(x), dim=-1)
    loss = F.cross_entropy(probs, y)

Use instead:
    loss = F.cross_entropy(model(x), y)   # raw logits; softmax only for reporting probabilities
"""
CODE, NAME, ENTRY = "KBL001", "softmax-before-cross-entropy", "double-softmax"
MESSAGE = "softmax output passed to a cross-entropy loss, which applies log_softmax itself: pass the raw logits"


def check(a, emit):
    for call, kind in a.loss_calls:
        if kind == "ce" and a.activation(call.args[0]) == "softmax":
            emit(call, CODE)
