"""Run an entry's snippet the way a user would, and map failures back to the YAML.

A snippet is run as a plain script in its own process (or under torchrun for
`launch: torchrun`), exactly as `kb snippet ID` prints it. The device is chosen
through the environment: the CPU run hides every GPU, so even a GPU machine
tests the CPU path the snippet falls back to.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from .util import PROSE_FIELDS

DEVICES = ("cpu", "cuda")
FIGURE_LINE = re.compile(r"^figure ([a-z][a-z0-9_]*): (.+?)\s*$")
# Where a restated figure may appear: the prose fields, and the title and symptoms too.
FIGURE_TEXT_FIELDS = ("title", "symptoms", *PROSE_FIELDS)
DEFAULT_TIMEOUT = 60
TORCHRUN_PROCS = 2


@dataclass
class SnippetRun:
    """What one run of a snippet did."""

    entry: object
    device: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    script: str
    kept: dict = field(default_factory=dict)
    exit_aborts: int = 0  # runs retried after the torchrun exit abort (EXIT_ABORT)

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def summary(self) -> str:
        """The last line the snippet printed: its human-readable result."""
        lines = [line for line in (self.stdout or "").splitlines() if line.strip()]
        return lines[-1] if lines else ""


def script_text(entry) -> str:
    """The program the test runs; `kb snippet` prints the same text."""
    return entry.snippet


def device_skip_reason(entry, device: str) -> str | None:
    """Why this (entry, device) pair cannot run here, or None when it can."""
    if device == "cpu":
        return None
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "CUDA is not available on this machine"
    if entry.launch == "torchrun" and torch.cuda.device_count() < TORCHRUN_PROCS:
        return f"needs {TORCHRUN_PROCS} GPUs for an nccl run, found {torch.cuda.device_count()}"
    return None


# The figures are recorded from seeded CPU runs, but x86 kernels pick their code path by CPU: on an
# AVX-512 Intel machine a snippet printed 67% dead units where the record, made on another machine,
# said 58% (a chaotic run amplifies last-bit differences). On x86 the CPU run therefore pins every
# kernel library to its generic path (torch's own kernels, MKL's reproducible mode, oneDNN), so a
# figure prints the same bits on any x86 CPU, wherever it is checked.
X86_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}


def child_env(device: str) -> dict:
    import platform
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")  # two snippets share two cores in CI
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        if platform.machine().lower() in ("x86_64", "amd64"):
            for name, value in X86_KERNELS.items():
                env.setdefault(name, value)
    return env


def command(entry, script_path: str) -> list:
    if entry.launch == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={TORCHRUN_PROCS}", script_path]
    return [sys.executable, script_path]


# Runs the script as __main__ (runpy, as `python script.py` would), then writes the loss
# lists it kept at module level to the file named by argv[1]; the snippet itself prints nothing extra.
_KEEP_GLOBALS = (
    "import json, runpy, sys\n"
    "out, sys.argv = sys.argv[1], sys.argv[2:]\n"
    "g = runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "keep = {}\n"
    "for k in %r:\n"
    "    try:\n"
    "        keep[k] = [float(v) for v in g.get(k, ())]\n"
    "    except Exception:\n"
    "        pass\n"
    "with open(out, 'w') as fh:\n"
    "    json.dump(keep, fh)\n"
)


# On torch 2.13's CPU build a gloo rank sometimes dies at interpreter exit with this C++ message and
# SIGABRT, after destroy_process_group() has returned on every rank: under load about 1 run in 15 of
# any of the DDP snippets, seen in CI. Nothing of the snippet's work is lost, so such a run is
# retried once; a snippet that fails any other way, or aborts twice, still fails.
EXIT_ABORT = "terminate called without an active exception"


def exit_aborted(run: SnippetRun) -> bool:
    """Whether a torchrun run failed only by the exit abort: no traceback reaches the snippet."""
    return (run.entry.launch == "torchrun" and not run.passed and not run.timed_out
            and EXIT_ABORT in (run.stderr or "") and failing_line(run) is None)


def run_snippet(entry, device: str = "cpu", timeout: float = DEFAULT_TIMEOUT,
                keep_globals: tuple = ()) -> SnippetRun:
    """Write the snippet to a temporary script and run it; never raises for a failing snippet.

    With `keep_globals` (names of module-level lists of numbers, e.g. the loss curves) a
    plain-python snippet is run through runpy and those lists come back in `run.kept`.
    A torchrun run that only hit the exit abort (EXIT_ABORT) is run once more."""
    run = _run_once(entry, device, timeout, keep_globals)
    if exit_aborted(run):
        run = _run_once(entry, device, timeout, keep_globals)
        run.exit_aborts = 1
    return run


def _run_once(entry, device: str, timeout: float, keep_globals: tuple) -> SnippetRun:
    with tempfile.TemporaryDirectory(prefix="kb-snippet-") as tmp:
        script = os.path.join(tmp, f"{entry.id.replace('-', '_')}.py")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(script_text(entry))
        cmd, kept_path = command(entry, script), None
        if keep_globals and entry.launch != "torchrun":
            kept_path = os.path.join(tmp, "kept-globals.json")
            cmd = [sys.executable, "-c", _KEEP_GLOBALS % (tuple(keep_globals),), kept_path, script]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=child_env(device),
                                  capture_output=True, text=True, timeout=timeout)
            rc, out, err, timed_out = proc.returncode, proc.stdout, proc.stderr, False
        except subprocess.TimeoutExpired as exc:
            rc, timed_out = None, True
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        seconds = time.perf_counter() - start
        err = map_to_yaml(err, script, entry)
        kept = {}
        if kept_path and rc == 0 and os.path.exists(kept_path):
            with open(kept_path, encoding="utf-8") as fh:
                kept = json.load(fh)
    return SnippetRun(entry=entry, device=device, returncode=rc, stdout=out, stderr=err,
                      seconds=seconds, timed_out=timed_out, script=script, kept=kept)


def yaml_line(entry, snippet_line: int) -> int:
    """The line of the entry's YAML file that holds line `snippet_line` of the snippet."""
    return entry.snippet_line + snippet_line - 1


def map_to_yaml(text: str, script_path: str, entry) -> str:
    """Point traceback frames in the temporary script at the YAML file instead."""
    pattern = re.compile(r'File "' + re.escape(script_path) + r'", line (\d+)')
    return pattern.sub(lambda m: f'File "{entry.path}", line {yaml_line(entry, int(m.group(1)))}', text)


def failing_line(run: SnippetRun) -> int | None:
    """The YAML line of the innermost snippet frame in the traceback, if any."""
    found = re.findall(r'File "' + re.escape(run.entry.path) + r'", line (\d+)', run.stderr or "")
    return int(found[-1]) if found else None


def printed_figures(stdout: str) -> dict:
    """The `figure NAME: VALUE` lines a snippet printed, as {name: value} (the last one wins)."""
    return {m.group(1): m.group(2) for m in map(FIGURE_LINE.match, (stdout or "").splitlines()) if m}


def prose(entry) -> str:
    """The entry's text a reader sees, where a restated figure must appear."""
    parts = []
    for name in FIGURE_TEXT_FIELDS:
        value = getattr(entry, name) or ""
        parts.extend(value if isinstance(value, list) else [value])
    return "\n".join(parts)


def states(text: str, value: str) -> bool:
    """Whether `value` occurs in `text` as a whole figure (58% is not found in 158% or 58.5%)."""
    return re.search(r"(?<![0-9A-Za-z.])" + re.escape(value) + r"(?![0-9A-Za-z]|\.[0-9])", text) is not None


def figure_problems(entry, stdout: str) -> list:
    """Where the entry's `figures`, its prose and what its snippet printed disagree (CPU run only:
    the figures are the seeded CPU values, CUDA kernels may print others)."""
    listed, printed, text = entry.figures or {}, printed_figures(stdout), prose(entry)
    problems = []
    for name, value in listed.items():
        if not states(text, value):
            problems.append(f"figure {name}: the entry lists {value!r} but its text never states it")
        if name not in printed:
            problems.append(f"figure {name}: the snippet printed no `figure {name}: ...` line")
        elif printed[name] != value:
            problems.append(f"figure {name}: the text says {value!r} but the snippet printed {printed[name]!r}")
    for name in printed.keys() - listed.keys():
        problems.append(f"figure {name}: printed by the snippet as {printed[name]!r} but not listed in `figures`")
    return problems
