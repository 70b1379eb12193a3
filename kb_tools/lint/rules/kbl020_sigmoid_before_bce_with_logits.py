"""What it finds: the output of a sigmoid (a function, a tensor method, an `nn.Sigmoid` layer or a
model whose forward ends in one) passed to `BCEWithLogitsLoss` / `binary_cross_entropy_with_logits`,
or to a loss class of the file that hands its input to one.

Why it hurts training: the loss applies a sigmoid itself, so the probabilities in [0, 1] become
sigmoid(p) in [0.5, 0.73]: predictions can never reach 0 or 1, the loss has a floor far above
zero, the gradients are squashed twice and the classifier barely separates the classes.

Example:
    prob = torch.sigmoid(model(x))
    loss = nn.BCEWithLogitsLoss()(prob, y)

Use instead:
    loss = nn.BCEWithLogitsLoss()(model(x), y)   # raw logits; sigmoid only for reporting
"""
CODE, NAME, ENTRY = "KBL020", "sigmoid-before-bce-with-logits", "double-sigmoid"
MESSAGE = "sigmoid output passed to a BCE-with-logits loss, which applies a sigmoid itself: pass the raw logits"


def check(a, emit):
    for call, kind in a.loss_calls:
        if kind == "bce-logits" and a.activation(call.args[0]) == "sigmoid":
            emit(call, CODE)
