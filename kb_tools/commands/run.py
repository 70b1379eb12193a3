"""`kb run`: an entry's snippet run the way its test runs it, then each figure it printed beside the
entry's claim."""
from __future__ import annotations

import os
import sys

from kb_tools.commands.common import entry_named, load_kb_checked
from kb_tools.commands.output import EXIT_OK, style
from kb_tools.core.util import KBError

NAME = "run"
SUMMARY = "run an entry's snippet as its test does (torchrun for distributed ones)"
DESCRIPTION = None


def run(args) -> int:
    """Run an entry's snippet the way its test does (torchrun for distributed ones); its exit status,
    then each figure it printed beside the entry's claim (a claim that fails here is exit 1)."""
    import importlib.util
    import subprocess
    import tempfile

    from kb_tools.snippets import runner as snippets
    kb = load_kb_checked(args)
    entry = entry_named(kb, args.id)
    if importlib.util.find_spec("torch") is None:
        raise KBError(f"torch is not installed in {sys.executable}; the snippets are tested against "
                      f"torch==2.13.0: `{sys.executable} -m pip install torch==2.13.0`")
    env = snippets.child_env(args.device) if args.device else {**os.environ, "PYTHONUNBUFFERED": "1"}
    sys.stdout.flush()
    printed = []
    with tempfile.TemporaryDirectory(prefix="kb-run-") as tmp:
        script = os.path.join(tmp, f"{entry.id.replace('-', '_')}.py")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(snippets.script_text(entry))
        try:  # the output is passed through as it comes, and kept for the figures
            proc = subprocess.Popen(snippets.command(entry, script), cwd=tmp, env=env,
                                    stdout=subprocess.PIPE, text=True, errors="replace", bufsize=1)
        except OSError as exc:
            raise KBError(f"cannot start the snippet: {exc.strerror or exc}") from None
        assert proc.stdout is not None  # a pipe
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            printed.append(line)
        proc.wait()
    if proc.returncode != 0:
        raise KBError(f"the snippet of {entry.id} exited with status {proc.returncode} ({entry.path})")
    return _report_figures(entry, "".join(printed))


def _report_figures(entry, stdout: str) -> int:
    """Each figure the snippet printed here beside the claim the entry states, on stderr."""
    from kb_tools.snippets import runner as snippets
    if not entry.figures:
        return EXIT_OK
    measured = snippets.printed_figures(stdout)
    width = max(map(len, entry.figures))
    failing = []
    print(f"figures measured here, against what {entry.id} claims:", file=sys.stderr)
    for name, claim in entry.figures.items():
        value = measured.get(name)
        holds = value is not None and snippets.claim_holds(claim, value)
        if not holds:
            failing.append(name)
        verdict = style("holds", "32") if holds else style("does not hold", "1;31")
        print(f"  {name:<{width}}  {value if value is not None else '(not printed)'}  "
              f"(claim: {claim})  {verdict}", file=sys.stderr)
    if failing:
        raise KBError(f"{entry.id}: {', '.join(failing)} measured outside the entry's claim on this machine; "
                      f"please report it with the output above ({entry.path})")
    return EXIT_OK


def add_arguments(p):
    p.add_argument("id", help="entry id or alias")
    p.add_argument("--device", choices=("cpu", "cuda"), help="run as the test does: cpu hides every GPU; "
                   "default: the snippet picks cuda when available")
