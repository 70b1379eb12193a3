"""What it finds: a tokenizer whose pad token is made its end-of-sequence token
(`tokenizer.pad_token = tokenizer.eos_token`, or the `_id` form) in a file that ends its examples
with EOS (`text + tokenizer.eos_token`, `ids + [eos_token_id]`, `append(eos_token_id)`,
`add_eos_token=True`) and builds causal-LM labels by masking the pad id:
`DataCollatorForLanguageModeling(..., mlm=False)`, or a statement that sets -100 where the ids equal
`pad_token_id` (`labels[labels == tok.pad_token_id] = -100`, `torch.where`, `masked_fill`, a
comprehension). A file that masks padding by the attention mask is left alone.

Why it hurts training: with pad and EOS sharing one id, masking by id also masks the real EOS at the
end of every example, so EOS is never a target. The loss looks healthy, but every step pushes the EOS
logit down, and the fine-tuned model does not stop generating.

Example:
    tokenizer.pad_token = tokenizer.eos_token
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)

Use instead:
    tokenizer.pad_token = tokenizer.eos_token
    labels = input_ids.clone()
    labels[attention_mask == 0] = -100          # mask padding by position, not by id
"""
import ast

from kb_tools.lint.analysis import dotted, is_false, keyword

CODE, NAME, ENTRY = "KBL025", "eos-masked-as-padding", "pad-token-is-eos"
MESSAGE = ("{how} masks every id equal to pad_token_id, and the pad token was made the EOS token (line {line}): "
           "the real EOS of each example is masked too, so the model never learns to stop; mask padding by the "
           "attention mask or give the tokenizer its own pad token")
MASKED = -100


def _pad_is_eos(a):
    """The assignment that makes the pad token the EOS token, or None."""
    for node in a.index.of(ast.Assign):
        target = node.targets[0] if len(node.targets) == 1 else None
        names = (dotted(target) or "", dotted(node.value) or "")
        if names[0].endswith(".pad_token") and names[1].endswith(".eos_token") or \
                names[0].endswith(".pad_token_id") and names[1].endswith(".eos_token_id"):
            return node
    return None


def _minus_100(node) -> bool:
    return any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant)
               and n.operand.value == -MASKED for n in ast.walk(node))


def _named(operand, word: str) -> bool:
    """`x.word`, `word`, or `batch["word"]`."""
    if isinstance(operand, ast.Subscript) and isinstance(operand.slice, ast.Constant):
        return operand.slice.value == word
    return (dotted(operand) or "").rsplit(".", 1)[-1] == word


def _compares_to(node, word: str) -> bool:
    """An `==` comparison in `node` with an operand named `word`."""
    return any(isinstance(n, ast.Compare) and any(isinstance(op, ast.Eq) for op in n.ops)
               and any(_named(x, word) for x in [n.left, *n.comparators]) for n in ast.walk(node))


def _eos(node) -> bool:
    return any((dotted(n) or "").rsplit(".", 1)[-1] in ("eos_token", "eos_token_id") for n in ast.walk(node)
               if isinstance(n, (ast.Attribute, ast.Name)))


def _appends_eos(a) -> bool:
    """Whether the file visibly ends its examples with EOS: `text + tok.eos_token`, `ids + [tok.eos_token_id]`,
    `ids.append(tok.eos_token_id)`, or a tokenizer loaded with `add_eos_token=True`. Without that, no EOS
    is in the data to be masked (the model may still never learn to stop, for another reason)."""
    if any(isinstance(b.op, ast.Add) and (_eos(b.left) or _eos(b.right)) for b in a.index.of(ast.BinOp)):
        return True
    for c in a.index.calls:
        flag = keyword(c, "add_eos_token")
        if isinstance(flag, ast.Constant) and flag.value is True:
            return True
        if isinstance(c.func, ast.Attribute) and c.func.attr in ("append", "extend") and any(_eos(x) for x in c.args):
            return True
    return False


def check(a, emit):
    made = _pad_is_eos(a)
    if made is None or not _appends_eos(a):
        return
    statements = a.index.of(ast.Assign, ast.Expr, ast.Return, ast.AugAssign)
    if any(_minus_100(s) and _compares_to(s, "attention_mask") for s in statements):
        return   # padding masked by position somewhere in the file
    for call in a.index.calls:
        if (a.imp.canon(call.func) or "").endswith("DataCollatorForLanguageModeling") and is_false(keyword(call, "mlm")):
            emit(call, CODE, how="DataCollatorForLanguageModeling(mlm=False)", line=made.lineno)
            return
    for s in statements:
        if _minus_100(s) and _compares_to(s, "pad_token_id"):
            emit(s, CODE, how="the label mask here", line=made.lineno)
            return
