"""`kb lint`: the KB's mistakes found in a training script by reading its code."""


def lint_text(code: str, path: str = "<string>") -> list:
    """engine.lint_source, imported on first use: `kb search` hands this to the report reader,
    which lints the code a pasted report holds and costs a plain one-line search nothing."""
    from kb_tools.lint.engine import lint_source
    return lint_source(code, path)
