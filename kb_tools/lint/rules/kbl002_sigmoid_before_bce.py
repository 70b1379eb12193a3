"""What it finds: the output of a sigmoid passed to `BCELoss` / `binary_cross_entropy`, or to
`BCEWithLogitsLoss`, which applies the sigmoid again.

Why it hurts training: BCELoss on sigmoid outputs saturates (its log is clamped at -100, so a
confident mistake stops producing a gradient), and BCEWithLogitsLoss on sigmoid outputs squashes
twice: predictions can never leave (0.5, 0.73), so the loss has a floor.

Example:
    loss = nn.BCELoss()(torch.sigmoid(model(x)), y)

Use instead:
    loss = nn.BCEWithLogitsLoss()(model(x), y)   # the raw logits: stable and unsaturated
"""
CODE, NAME, ENTRY = "KBL002", "sigmoid-before-bce", "bce-with-logits"
MESSAGE = "sigmoid output passed to {loss}: use BCEWithLogitsLoss on the raw logits (stable, no saturation)"


def check(a, emit):
    for call, kind in a.loss_calls:
        if kind in ("bce", "bce-logits") and a.activation(call.args[0]) == "sigmoid":
            loss = "BCEWithLogitsLoss, which applies sigmoid again" if kind == "bce-logits" else "BCELoss"
            emit(call, CODE, loss=loss)
