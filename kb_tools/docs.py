"""The reference parts of README.md and CONTRIBUTING.md, generated from the code that enforces them.

A fact stated twice drifts: the field tables come from load.py's schema, the
code tables from model.py's one list of diagnostics, each command's usage from
its argparse parser, the shipped counts from the KB itself, and every example of
a command's output from running that command on the checkout (EXAMPLES). Each
generated block sits between `<!-- begin generated: NAME -->` and
`<!-- end generated: NAME -->`; `python scripts/generate_docs.py` rewrites the
blocks and `--check` fails when a file differs from what the code says (a test
runs the check, so CI does too).
"""
from __future__ import annotations

import difflib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from kb_tools import PACKAGE_DIR
from kb_tools.core.util import KBError, write_atomic

BEGIN, END = "<!-- begin generated: {} -->", "<!-- end generated: {} -->"
HELP_COLUMNS = 100  # the width usage text is rendered at, whatever the terminal


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _kind(kind) -> str:
    """A schema kind as the tables show it."""
    if isinstance(kind, tuple):
        return "one of " + ", ".join(f"`{v}`" for v in kind)
    return {"str": "str", "list": "list of str", "bool": "bool", "mapping": "mapping",
            "lines": "`[first, last]`", "figures": "mapping of str to quoted str",
            "citations": "list of `{quote, supports}`", "fix_pair": "`{before, after}` of code"}[kind]


def field_table(spec: dict) -> str:
    rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {_cell(_kind(kind))} | {_cell(req)} | {_cell(meaning)} |"
             for name, (kind, req, meaning) in spec.items()]
    return "\n".join(rows)


def code_table(codes: dict, name_heading: str) -> str:
    rows = [f"| code | {name_heading} | meaning |", "|---|---|---|"]
    rows += [f"| `{code}` | `{name}` | {_cell(meaning)} |" for code, (name, meaning) in codes.items()]
    return "\n".join(rows)


def command_usage() -> str:
    """`kb --help` and every command's `--help`, as a user at a 100-column terminal sees them."""
    from kb_tools import cli, commands
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS + 2)  # the formatter keeps two columns of margin
    try:
        parts = [cli.build_parser().format_help().rstrip()]
        for name in commands.ORDER:
            parser = cli.build_parser(name)
            sub = next(a for a in parser._actions if a.dest == "command").choices[name]
            nested = [a for a in sub._actions if getattr(a, "choices", None) and a.dest == "evidence_command"]
            parts.append(sub.format_help().rstrip())
            for action in nested:
                parts.extend(p.format_help().rstrip() for p in action.choices.values())
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return "```text\n" + "\n\n".join(parts) + "\n```"


# Where each kind of addition goes: (what, [(path in the checkout, what to do there)]). Generated into
# CONTRIBUTING.md; a path that no longer exists stops the generation, so the section cannot go stale.
WHERE_TO_ADD = (
    ("an entry", [("kb/entries/", "one YAML file under its area's folder (fields below)"),
                  ("tests/fix_removed/", "the edits that undo its fix, which must make its snippet fail")]),
    ("a field of an entry", [("kb_tools/core/load.py", "its row in ENTRY_FIELDS (type, required, meaning) and its check"),
                             ("kb_tools/core/model.py", "its slot on Entry"),
                             ("kb_tools/render/sections.py", "a Part, if readers should see it: kb show, the MCP "
                                                             "show tool, the Markdown copies and the site page follow")]),
    ("a lint rule", [("kb_tools/lint/rules/", "one module: CODE, NAME, ENTRY, MESSAGE, check() and the docstring "
                                              "sections README's rule table is made from"),
                     ("tests/lint/cases.yaml", "bad examples it must flag and look-alikes it must not")]),
    ("a real bug for kb lint", [("tests/lint/bugs/", "the case in the user's code shape and its MANIFEST item; the "
                                                     "split follows the URL (README there)")]),
    ("a command", [("kb_tools/commands/", "one module: NAME, SUMMARY, DESCRIPTION, add_arguments(), run()"),
                   ("kb_tools/commands/__init__.py", "its name in ORDER (README's usage blocks follow)")]),
    ("a page of the site", [("site_templates/", "its jinja2 template"),
                            ("kb_tools/site/build.py", "one render() call in render_pages")]),
    ("an MCP tool", [("kb_tools/mcp_server.py", "one @tool function in build_server (README's tool list follows)")]),
    ("a search embedder", [("kb_tools/search/embedders/", "one module with load(), and its line in LOADERS")]),
    ("a watch check", [("kb_tools/watch/checks/", "one module kbwNNN_<name>.py holding one Check subclass "
                                                  "(README's check list follows)"),
                       ("tests/watch/cases/", "a bug script that must get its finding and a fixed twin that must not, "
                                              "under the entry's folder")]),
)


def where_to_add() -> str:
    """CONTRIBUTING's "where to add" table, each path checked to exist in this checkout."""
    root = os.path.dirname(PACKAGE_DIR)
    rows = ["| to add | where | what |", "|---|---|---|"]
    for what, places in WHERE_TO_ADD:
        for n, (path, how) in enumerate(places):
            if not os.path.exists(os.path.join(root, path)):
                raise KBError(f"docs.WHERE_TO_ADD names {path}, which is not in the checkout: update it")
            rows.append(f"| {what if n == 0 else ''} | `{path}` | {_cell(how)} |")
    return "\n".join(rows)


def lint_rule_table() -> str:
    """Every lint rule from its module (kb_tools/lint/rules/): code, name, the entry it points to,
    and the first sentence of what it finds."""
    from kb_tools.lint import rules
    rows = ["| code | name | entry | what it finds |", "|---|---|---|---|"]
    for m in rules.ALL:
        finds = " ".join(m.__doc__.split("\n\n", 1)[0].split()).removeprefix("What it finds: ")
        rows.append(f"| `{m.CODE}` | `{m.NAME}` | `{m.ENTRY}` | {_cell(finds)} |")
    return "\n".join(rows)


def mcp_tool_list(kb) -> str:
    """The MCP server's tools as it registers them: each one's parameters (defaults shown) and
    description, so the README cannot drift from the server."""
    import asyncio

    from kb_tools.mcp_server import build_server
    lines = []
    for tool in asyncio.run(build_server(kb.root).list_tools()):
        props, required = tool.input_schema.get("properties", {}), set(tool.input_schema.get("required") or ())
        params = ", ".join(name if name in required else f"{name}={props[name].get('default')!r}".replace("'", "")
                           for name in props)
        lines.append(f"- `{tool.name}({params})`: {' '.join((tool.description or '').split())}")
    return "\n".join(lines)


def shipped_counts(kb) -> str:
    return f"```\n$ kb check\nok: {len(kb.entries)} entries, {len(kb.quotes)} quotes, {len(kb.sources)} sources\n```"


def shipped_sources(kb) -> str:
    kinds = {s.kind for s in kb.sources.values()}
    torch_objects = sum(1 for s in kb.sources.values() if s.package == "torch")
    git = sum(1 for s in kb.sources.values() if s.repo)
    web = sum(1 for s in kb.sources.values() if not s.repo and not s.package)
    return (f"The shipped KB has {len(kb.quotes)} quotes from {len(kb.sources)} sources, "
            f"{'all primary' if kinds == {'primary'} else 'primary and secondary'}: {git} captured whole "
            f"or as excerpts from their git repositories, {web} web pages, and {torch_objects} torch objects "
            f"(each also cached as an `evidence/torch-*.md` file, for reading and for machines without torch).")


# ---------------------------------------------------------------- example output

@dataclass(frozen=True)
class Example:
    """A command shown in README.md with what it prints, run on the checkout when the docs are generated.

    `command` is what the reader types: `kb ...` (optionally reading a file of the checkout with `< FILE`),
    optionally piped to `python` (the output runs as a
    script, on CPU as the snippet tests run it) or to `head -N`; `status` is the exit status it must
    end with. `lines` keeps that many lines of the output (negative: drops that many from the end)
    and marks the cut with `...`. With `edit`, (file under the checkout, old text, new text), the
    command runs on a copy of the KB with that change, to show how a mistake is reported; `copy`
    names what the copy holds (default: kb/ and evidence/; a name ending in / is an empty folder).
    """

    command: str
    status: int = 0
    note: str = ""
    lines: int | None = None
    edit: tuple | None = None
    copy: tuple = ("kb", "evidence")


EXAMPLES = {
    "example-search": [
        Example('kb search "loss flat" -n 3'),
        Example('kb search "RuntimeError: Error(s) in loading state_dict for Net: size mismatch for head.weight: '
                'copying a param with shape torch.Size([10, 32]) from checkpoint" -n 1'),
        Example('kb search "qwertyuiop asdfghjkl"'),
    ],
    "example-search-json": [Example('kb search "loss flat" -n 1 --json')],
    "example-search-report": [Example("kb search - -n 3 < examples/issue_flat_loss.md")],
    "example-search-scope": [Example('kb search "CUDA out of memory when I train ViT-L with batch size 64" -n 2')],
    "example-show": [
        Example("kb show O12 | head -4"),
        Example("kb show double-softmx", status=1),
        # an entry whose output is the same on every machine: a training snippet prints figures that move
        # with the CPU and the seed within the ranges its entry states, which a fixed README cannot show
        Example("kb snippet bos-token-duplication | python"),
        Example("kb list --area loss", lines=2),
    ],
    "example-check-problem": [
        Example("kb check", status=1, note="with a typo in a see_also",
                edit=("kb/entries/loss/double-softmax.yaml", "see_also: [nll-needs-log-softmax,",
                      "see_also: [nll-needs-log-softmx,")),
    ],
    "example-eval": [Example("kb eval", lines=2)],
    "example-verify-defect": [
        Example("kb verify", status=1, note="with one word of a quote changed", lines=-1,
                edit=("kb/quotes/karpathy-recipe-2019.yaml", "patience and attention to detail",
                      "patience and devotion to detail"),
                copy=("kb/tags.yaml", "kb/entries/", "kb/quotes/karpathy-recipe-2019.yaml",
                      "evidence/karpathy-recipe-2019.md")),
    ],
    "example-lint": [
        Example("kb lint examples/train_buggy.py", status=1),
        Example("kb search --from-lint examples/train_buggy.py"),
    ],
    "example-watch": [Example("kb watch --steps 50 -- python examples/train_buggy.py", status=1)],
    "example-watch-checks": [Example("kb watch --list-checks")],
}
EXAMPLE_TIMEOUT = 300  # seconds for one command (a snippet imports torch and trains)
_example_blocks = {}   # (KB root, its signature) -> the example blocks, made once per process


def run_example(example: Example, checkout: str) -> str:
    """`$ command` and what it prints (stdout, then stderr, as a terminal shows a command that
    writes its summary last), run in `checkout` against its KB."""
    from kb_tools.snippets.runner import child_env
    stages = [stage.strip() for stage in example.command.split(" | ")]
    argv = shlex.split(stages[0])
    stdin = ""
    if "<" in argv:  # `kb search - < examples/issue.md`: a file of the checkout on standard input
        at = argv.index("<")
        with open(os.path.join(checkout, argv[at + 1]), encoding="utf-8") as fh:
            stdin = fh.read()
        argv = argv[:at] + argv[at + 2:]
    if argv[:1] != ["kb"]:
        raise KBError(f"example `{example.command}`: an example runs a kb command")
    # as a reader's shell runs it: the packaged ranking (not KB_MODEL_DIR's), no colour, this KB
    env = {k: v for k, v in os.environ.items() if k not in ("KB_PATH", "KB_MODEL_DIR", "FORCE_COLOR")}
    env.update(NO_COLOR="1", COLUMNS="100", PYTHONPATH=os.path.dirname(PACKAGE_DIR),
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))  # `python`: this venv's
    with tempfile.TemporaryDirectory(prefix="kb-docs-") as tmp:
        where = checkout
        if example.edit is not None:  # a changed copy: uncached, so no cache file is left for it
            where, env["KB_NO_CACHE"] = os.path.join(tmp, "checkout"), "1"
            _copy_with_edit(checkout, where, example.copy, *example.edit)
        proc = _run([sys.executable, "-m", "kb_tools", "--kb", os.path.join(where, "kb"), *argv[1:]], where, env,
                    stdin=stdin)
        out, err = proc.stdout, proc.stderr
        for stage in stages[1:]:  # the pipeline's status is its last command's, as in a shell
            if stage == "python" and proc.returncode == 0:
                proc = _run([sys.executable, "-"], tmp, child_env("cpu"), stdin=out)
                out, err = proc.stdout, err + proc.stderr
            elif stage.startswith("head -"):
                out = "".join(out.splitlines(True)[:int(stage[len("head -"):])])
            elif stage != "python":
                raise KBError(f"example `{example.command}`: cannot run `| {stage}`")
        if proc.returncode != example.status or "Traceback" in err:
            last = (err.strip() or out.strip() or "no output").splitlines()[-1]
            raise KBError(f"the README example `{example.command}` exited with status {proc.returncode} "
                          f"(expected {example.status}): {last}")
    text = (out + err).rstrip("\n").split("\n")
    if example.lines is not None:
        text = text[:example.lines] + ["..."]
    shown = f"$ {example.command}" + (f"    # {example.note}" if example.note else "")
    return "\n".join([shown] + text)


def _run(argv: list, cwd: str, env: dict, stdin: str = "") -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                              timeout=EXAMPLE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KBError(f"cannot run the example `{' '.join(argv)}`: {exc}") from None


def _copy_with_edit(checkout: str, to: str, parts: tuple, path: str, old: str, new: str) -> None:
    """Copy `parts` of the checkout to `to` (a name ending in / is made as an empty folder), then
    replace `old` with `new` in `path` there; a KBError when `old` is no longer in that file."""
    for part in parts:
        source, target = os.path.join(checkout, part), os.path.join(to, part)
        if part.endswith("/"):
            os.makedirs(target, exist_ok=True)
        elif os.path.isdir(source):
            shutil.copytree(source, target)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
    with open(os.path.join(to, path), encoding="utf-8") as fh:
        text = fh.read()
    if old not in text:
        raise KBError(f"{path} no longer holds '{old}', which a README example changes: edit docs.EXAMPLES")
    with open(os.path.join(to, path), "w", encoding="utf-8") as fh:
        fh.write(text.replace(old, new, 1))


def example_blocks(kb) -> dict:
    """Each README example block: its commands run on the checkout that holds `kb`, in a code block."""
    from kb_tools.core.locate import kb_signature
    key = (os.path.realpath(kb.root), kb_signature(kb.root))
    if key not in _example_blocks:
        checkout = os.path.dirname(os.path.abspath(kb.root))
        _example_blocks[key] = {name: "```\n" + "\n\n".join(run_example(e, checkout) for e in examples) + "\n```"
                                for name, examples in EXAMPLES.items()}
    return _example_blocks[key]


def blocks(kb) -> dict:
    """Every generated block's text, by name."""
    from kb_tools.core.load import ENTRY_FIELDS, QUOTE_FIELDS, SOURCE_FIELDS
    from kb_tools.core.model import CHECK_CODES, VERIFY_CODES
    return {
        "entry-fields": field_table(ENTRY_FIELDS),
        "quote-fields": field_table(QUOTE_FIELDS),
        "source-fields": field_table(SOURCE_FIELDS),
        "check-codes": code_table(CHECK_CODES, "name"),
        "verify-codes": code_table(VERIFY_CODES, "kind"),
        "command-usage": command_usage(),
        "lint-rules": lint_rule_table(),
        "where-to-add": where_to_add(),
        "mcp-tools": mcp_tool_list(kb),
        "shipped-counts": shipped_counts(kb),
        "shipped-sources": shipped_sources(kb),
        **example_blocks(kb),
    }


DOC_FILES = ("README.md", "CONTRIBUTING.md")


def fill(text: str, generated: dict, path: str = "") -> str:
    """`text` with every generated block replaced by its current content.
    A begin marker without its end, or a block name the code does not generate, is a KBError."""
    out, at = [], 0
    while True:
        start = text.find("<!-- begin generated: ", at)
        if start == -1:
            out.append(text[at:])
            return "".join(out)
        name = text[start + len("<!-- begin generated: "):text.find(" -->", start)]
        if name not in generated:
            raise KBError(f"{path}: unknown generated block '{name}' (known: {', '.join(sorted(generated))})")
        end = text.find(END.format(name), start)
        if end == -1:
            raise KBError(f"{path}: generated block '{name}' has no `{END.format(name)}`")
        out.append(text[at:start])
        out.append(f"{BEGIN.format(name)}\n{generated[name]}\n")
        at = end


def update_docs(root: str, kb, check: bool = False) -> list:
    """Bring each doc file's generated blocks up to date (or, with `check`, only compare).
    Returns [(path, unified diff)] of the files that differed."""
    generated = blocks(kb)
    changed = []
    for name in DOC_FILES:
        path = os.path.join(root, name)
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise KBError(f"{path}: cannot read: {exc.strerror or exc}") from None
        new = fill(text, generated, name)
        if new != text:
            diff = "".join(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                f"{name} (as written)", f"{name} (as generated)"))
            changed.append((name, diff))
            if not check:
                write_atomic(path, new)
    return changed
