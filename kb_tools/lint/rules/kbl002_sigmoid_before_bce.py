"""What it finds: the output of a sigmoid passed to `BCELoss` / `binary_cross_entropy` (a sigmoid
passed to `BCEWithLogitsLoss`, which applies it again, is KBL020's).

Why it hurts training: BCELoss on sigmoid outputs saturates (its log is clamped at -100, so a
confident mistake stops producing a gradient) and is less stable than the fused
BCEWithLogitsLoss, which computes the same loss from the logits.

Example:
    loss = nn.BCELoss()(torch.sigmoid(model(x)), y)

Use instead:
    loss = nn.BCEWithLogitsLoss()(model(x), y)   # the raw logits: stable and unsaturated
"""
CODE, NAME, ENTRY = "KBL002", "sigmoid-before-bce", "bce-with-logits"
MESSAGE = "sigmoid output passed to {loss}: use BCEWithLogitsLoss on the raw logits (stable, no saturation)"


def check(a, emit):
    for call, kind in a.loss_calls:
        if kind == "bce" and a.activation(call.args[0]) == "sigmoid":
            emit(call, CODE, loss="BCELoss")
