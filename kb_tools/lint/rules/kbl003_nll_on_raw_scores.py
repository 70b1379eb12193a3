"""What it finds: `nll_loss` / `NLLLoss` on scores that are visibly not log-probabilities: raw
logits (a Linear layer's output), softmax probabilities or sigmoid outputs.

Why it hurts training: NLLLoss only picks `-input[target]`; on raw scores it rewards making the
target's score unboundedly large instead of fitting a distribution, and on probabilities the
loss is bounded in [-1, 0], so it neither calibrates nor learns well.

Example:
    loss = F.nll_loss(model(x), y)   # model ends in nn.Linear

Use instead:
    loss = F.nll_loss(F.log_softmax(model(x), dim=-1), y)   # or F.cross_entropy(model(x), y)
"""
CODE, NAME, ENTRY = "KBL003", "nll-on-raw-scores", "nll-needs-log-softmax"
MESSAGE = "NLLLoss on scores that are not log-probabilities: apply log_softmax first, or use CrossEntropyLoss"


def check(a, emit):
    for call, kind in a.loss_calls:
        if kind == "nll" and a.activation(call.args[0]) in ("softmax", "raw", "sigmoid"):
            emit(call, CODE)
