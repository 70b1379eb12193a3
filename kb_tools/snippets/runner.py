"""Run an entry's snippet the way a user would, and map failures back to the YAML.

A snippet is run as a plain script in its own process (or as torchrun's two workers for
`launch: torchrun`), exactly as `kb snippet ID` prints it. The device is chosen
through the environment: the CPU run hides every GPU, so even a GPU machine
tests the CPU path the snippet falls back to.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kb_tools import PACKAGE_DIR
from kb_tools.core.util import PROSE_FIELDS

DEVICES = ("cpu", "cuda")
FIGURE_LINE = re.compile(r"^figure ([a-z][a-z0-9_]*): (.+?)\s*$")
# Where a restated figure may appear: the prose fields, and the title and symptoms too.
FIGURE_TEXT_FIELDS = ("title", "symptoms", *PROSE_FIELDS)
# CPU seconds per thread: the slowest snippet uses about 25 on one core of a 2-core CI machine.
DEFAULT_TIMEOUT = 120
TORCHRUN_PROCS = 2


@dataclass
class SnippetRun:
    """What one run of a snippet did."""

    entry: Any  # the model's Entry (or an edited copy of it)
    device: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    script: str
    kept: dict = field(default_factory=dict)
    exit_aborts: int = 0  # runs retried after the torchrun exit abort (EXIT_ABORT)
    deadlocked: bool = False  # stopped after IDLE_LIMIT seconds of almost no CPU (a forked run only)
    deadlocks: int = 0  # runs retried after such a deadlock
    cpu_seconds: float | None = None  # the snippet's own CPU time (a forked run only)

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


def child_env(device: str) -> dict:
    """The environment a snippet runs in: the user's own, with the GPU hidden for a CPU run.

    No kernel path is pinned: a user pastes the snippet into a shell whose torch picks its own
    (AVX2, AVX-512, ...), so every claim and figure is stated to hold on any of them (the
    spread is measured by bench/figure_spread.py), and the test runs what the user runs."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")  # two snippets share two cores in CI
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def launch_line(entry, script: str = "snippet.py") -> str:
    """How a reader starts the snippet in a shell, saved as `script`: the one place the torchrun
    command is written (kb show, kb snippet's JSON, the site and the runner below follow it)."""
    if entry.launch == "torchrun":
        return f"torchrun --standalone --nproc-per-node {TORCHRUN_PROCS} {script}"
    return f"python {script}"


def command(entry, script_path: str) -> list:
    if entry.launch == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={TORCHRUN_PROCS}", script_path]
    return [sys.executable, script_path]


# Runs the script as __main__ (runpy, as `python script.py` would), then writes the loss
# lists it kept at module level to the file named by argv[1]; the snippet itself prints nothing extra.
# (The fork server does the same in its child; this is the path of a run in a fresh interpreter.)
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


# Seconds in which a forked snippet (or its ranks together) uses almost no CPU (server.IDLE_SHARE):
# it is deadlocked, and stopped then rather than at the wall backstop. Torch 2.13's gloo can deadlock
# a rank as its process group is freed (the main thread joins a gloo worker, holding the GIL, while
# the worker waits for the GIL to free the autograd context a finished all-reduce still holds): in
# 300 forked runs of ddp-unused-parameters under load, 6. A torchrun snippet that deadlocks is run
# once more; a plain one fails.
IDLE_LIMIT = 20.0


def exit_aborted(run: SnippetRun) -> bool:
    """Whether a torchrun run failed only by the exit abort: no traceback reaches the snippet."""
    return (run.entry.launch == "torchrun" and not run.passed and not run.timed_out
            and EXIT_ABORT in (run.stderr or "") and failing_line(run) is None)


def wall_backstop(cpu_limit: float) -> float:
    """The wall-clock limit behind a CPU-time limit: only for a child that hangs without using the
    CPU (a deadlock, a sleep), so it is far above what load can stretch a CPU-bound run to."""
    return max(300.0, 10.0 * cpu_limit)


def run_snippet(entry, device: str = "cpu", timeout: float = DEFAULT_TIMEOUT,
                keep_globals: tuple = (), script: str | None = None, env: dict | None = None,
                wall_timeout: float | None = None) -> SnippetRun:
    """Run the snippet (or `script`, a variant of it) in a process of its own; never raises for a
    failing snippet.

    `timeout` is in CPU seconds of the snippet's process, per thread it may use: a run is only cut
    short for the work it does, never because the machine is loaded. With `keep_globals` (names of
    module-level lists of numbers, e.g. the loss curves) those lists come back in `run.kept`. A
    snippet runs in a child of the fork server (torch already imported), a torchrun snippet in
    TORCHRUN_PROCS children with the environment torchrun gives its workers; with the server
    off (FORK_SERVER_VAR=0), in a fresh `python` or `torchrun`. A torchrun run that only hit one of
    gloo's teardown faults on torch 2.13 (the exit abort, EXIT_ABORT, or forked ranks deadlocked
    without using the CPU, IDLE_LIMIT) is run once more; a second fault fails it. A forked plain
    snippet that deadlocks fails after IDLE_LIMIT.
    `wall_timeout` overrides the wall-clock backstop (wall_backstop)."""
    env = env if env is not None else child_env(device)
    text = script_text(entry) if script is None else script
    limits = (max(1, int(timeout * _threads(env))), wall_timeout)
    run = _run_once(entry, device, text, env, limits, keep_globals)
    if exit_aborted(run) or (run.deadlocked and entry.launch == "torchrun"):
        first = run
        run = _run_once(entry, device, text, env, limits, keep_globals)
        run.exit_aborts, run.deadlocks = int(exit_aborted(first)), int(first.deadlocked)
    return run


def _threads(env: dict) -> int:
    try:
        return max(1, int(env.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return os.cpu_count() or 1


def _run_once(entry, device: str, text: str, env: dict, limits: tuple, keep_globals: tuple) -> SnippetRun:
    cpu_limit, wall_limit = limits[0], limits[1] or wall_backstop(limits[0])
    with tempfile.TemporaryDirectory(prefix="kb-snippet-") as tmp:
        script = os.path.join(tmp, f"{entry.id.replace('-', '_')}.py")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(text)
        kept_path = os.path.join(tmp, "kept-globals.json") if keep_globals and entry.launch != "torchrun" else None
        if fork_server_usable(env):
            ranks = TORCHRUN_PROCS if entry.launch == "torchrun" else 1
            reply, out, err = _run_forked(script, tmp, env, (cpu_limit, wall_limit), keep_globals, kept_path, ranks)
        else:
            reply, out, err = _run_process(entry, script, tmp, env, (cpu_limit, wall_limit), keep_globals, kept_path)
        rc = None if reply["timed_out"] else reply["returncode"]
        err = map_to_yaml(err, script, entry)
        kept = {}
        if kept_path and rc == 0 and os.path.exists(kept_path):
            with open(kept_path, encoding="utf-8") as fh:
                kept = json.load(fh)
    return SnippetRun(entry=entry, device=device, returncode=rc, stdout=out, stderr=err,
                      seconds=reply["seconds"], timed_out=bool(reply["timed_out"]), script=script, kept=kept,
                      cpu_seconds=reply.get("cpu_seconds"), deadlocked=reply["timed_out"] == "idle")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _run_forked(script: str, tmp: str, env: dict, limits: tuple, keep_globals: tuple, kept_path, ranks: int = 1):
    out_path, err_path = os.path.join(tmp, "stdout.txt"), os.path.join(tmp, "stderr.txt")
    request = {"script": script, "cwd": tmp, "env": env, "stdout": out_path, "stderr": err_path,
               "keep": list(keep_globals), "kept_path": kept_path, "cpu_limit": limits[0], "wall_limit": limits[1],
               "idle_limit": IDLE_LIMIT}
    if ranks > 1:  # torchrun's workers, forked with the environment torchrun gives them (server.run_ranks)
        request["ranks"] = ranks
    reply = fork_server(env).run(request)
    return reply, _read(out_path), _read(err_path)


def _limit_cpu(seconds: int):
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))  # each process of the tree
    return apply


def _run_process(entry, script: str, tmp: str, env: dict, limits: tuple, keep_globals: tuple, kept_path):
    """A fresh interpreter (or torchrun's process tree), where the fork server is off or unavailable."""
    cpu_limit, wall_limit = limits
    cmd = command(entry, script)
    if kept_path:
        cmd = [sys.executable, "-c", _KEEP_GLOBALS % (tuple(keep_globals),), kept_path, script]
    posix = os.name == "posix"
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=posix,
                            preexec_fn=_limit_cpu(cpu_limit) if posix else None)
    timed_out = None
    try:
        out, err = proc.communicate(timeout=wall_limit)
    except subprocess.TimeoutExpired:
        timed_out = "wall"
        _kill_tree(proc)
        out, err = proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL) and timed_out is None:
        timed_out = "cpu"
    return {"returncode": proc.returncode, "timed_out": timed_out, "seconds": seconds}, out or "", err or ""


def _kill_tree(proc) -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------- the fork server's client

FORK_SERVER_VAR = "KB_SNIPPET_FORK"  # "0" runs every snippet in a fresh interpreter instead


def fork_server_usable(env: dict | None = None) -> bool:
    """Linux, not switched off, and (given the run's environment) a run that hides every GPU. Once
    torch has started and warmed up on a machine with a GPU, a forked child cannot use CUDA (torch
    2.11 on an H200: "Cannot re-initialize CUDA in forked subprocess"), so a run that may use
    CUDA gets a fresh interpreter."""
    if not sys.platform.startswith("linux") or os.environ.get(FORK_SERVER_VAR, "1") == "0":
        return False
    return env is None or hides_gpus(env)


def hides_gpus(env: dict) -> bool:
    """Does this environment hide every GPU from torch (CUDA_VISIBLE_DEVICES empty or -1)?"""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and visible.strip() in ("", "-1")


class ForkServerError(RuntimeError):
    """The fork server died or could not start; its stderr says why."""


class ForkServer:
    """One `python -m kb_tools.snippets.server` for one environment, started on first use."""

    def __init__(self, env: dict):
        self.env = env
        self.log = tempfile.TemporaryFile(mode="w+", prefix="kb-fork-server-")
        self.proc = subprocess.Popen([sys.executable, "-m", "kb_tools.snippets.server"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, cwd=os.path.dirname(PACKAGE_DIR))
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self._to, self._from = self.proc.stdin, self.proc.stdout
        self._reply()  # {"ready": true}: torch is imported and warm

    def _reply(self) -> dict:
        line = self._from.readline()
        if not line:
            self.log.seek(0)
            tail = "\n".join(self.log.read().strip().splitlines()[-20:])
            raise ForkServerError(f"the snippet fork server exited ({self.proc.poll()}):\n{tail}")
        return json.loads(line)

    def run(self, request: dict) -> dict:
        self._to.write(json.dumps(request) + "\n")
        self._to.flush()
        return self._reply()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._to.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.log.close()


_SERVERS: dict = {}
_SERVERS_LOCK = threading.Lock()
MAX_SERVERS = 8  # per thread: the oldest is closed beyond this (each holds an imported torch)
# Variables that change from one run to the next without changing how torch imports (pytest sets
# PYTEST_CURRENT_TEST for every test): runs that differ only in these share a server, and each
# child still gets the caller's exact environment.
PER_RUN_VARS = frozenset({"PYTEST_CURRENT_TEST"})


def fork_server(env: dict) -> ForkServer:
    """The warm server for this environment (threads, kernels and devices are fixed at torch's
    import, so each distinct environment gets its own) and this thread (a server runs one snippet
    at a time); restarted if it died."""
    key = (threading.get_ident(), tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN_VARS)))
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None or server.proc.poll() is not None:
            if server is not None:
                server.close()
            mine = [k for k in _SERVERS if k[0] == key[0]]  # another thread's server may be busy
            for old in mine[:max(0, len(mine) - MAX_SERVERS + 1)]:
                _SERVERS.pop(old).close()
            server = _SERVERS[key] = ForkServer(env)
            if len(_SERVERS) == 1:
                atexit.register(close_fork_servers)
    return server


def close_fork_servers() -> None:
    with _SERVERS_LOCK:
        for server in _SERVERS.values():
            server.close()
        _SERVERS.clear()


# Seeding calls a snippet makes: torch.manual_seed(0), gen.manual_seed(2), random.seed(0),
# np.random.seed(0), np.random.default_rng(0), torch.cuda.manual_seed_all(s).
_SEED_CALL = re.compile(r"\b(manual_seed(?:_all)?|(?<=random\.)seed|default_rng|RandomState)\((?=[^)\s])")


def with_seed_offset(text: str, offset: int) -> str:
    """The snippet with every seed it sets moved by `offset` (0 leaves it as it is): the same
    program on other random draws, for measuring how far its figures move with the seed."""
    if not offset:
        return text
    out, pos = [], 0
    for match in _SEED_CALL.finditer(text):
        start = match.end()
        depth, end = 1, start
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        if depth:
            break
        out.append(text[pos:start] + f"({text[start:end - 1]}) + {offset}")
        pos = end - 1
    out.append(text[pos:])
    return "".join(out)


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


# A figure's claim is the text the entry states, where each number may be a range or a bound:
# "104" (exact), "80-130" or "5.5-8.2x" (a range, ends included), "over 80", "at least 2",
# "under 20", "at most 5". The snippet prints the value it measured ("figure NAME: 114"); the claim
# holds when the text around the numbers is the same and each number falls in its slot. A figure
# that moves with the CPU, the thread count, the seed or the device is stated as the range or the
# bound that held over all of them (bench/figure_spread.py measures it).
_NUM = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
_BOUNDS = {"over": float.__gt__, "above": float.__gt__, "more than": float.__gt__, "at least": float.__ge__,
           "under": float.__lt__, "below": float.__lt__, "less than": float.__lt__, "at most": float.__le__}
_SLOT = re.compile(r"(?<![\w.])(?:(?P<bound>" + "|".join(_BOUNDS) + r") (?P<limit>" + _NUM + r")"
                   r"|(?P<low>" + _NUM + r")[-\u2013](?P<high>" + _NUM + r")"
                   r"|(?P<exact>" + _NUM + r"))(?![\d])")
_PRINTED_NUM = re.compile(r"(?<![\w.])" + _NUM + r"(?![\d])")


def _skeleton(text: str, pattern) -> tuple:
    """(the text with each number or slot replaced by a marker, the matches in order)."""
    matches = list(pattern.finditer(text))
    skeleton = pattern.sub("\x00", text)
    return " ".join(skeleton.split()), matches


def claim_holds(claim: str, printed: str) -> bool:
    """Whether the value a snippet printed is what the entry's figure claims (see above)."""
    if claim == printed:
        return True
    shape, slots = _skeleton(claim, _SLOT)
    printed_shape, numbers = _skeleton(printed, _PRINTED_NUM)
    if shape != printed_shape or len(slots) != len(numbers):
        return False
    for slot, number in zip(slots, numbers):
        value = float(number.group(0))
        if slot.group("bound"):
            if not _BOUNDS[slot.group("bound")](value, float(slot.group("limit"))):
                return False
        elif slot.group("low") is not None:
            if not float(slot.group("low")) <= value <= float(slot.group("high")):
                return False
        elif value != float(slot.group("exact")):
            return False
    return True


def claim_is_exact(claim: str) -> bool:
    """A claim with no range or bound in it: the snippet must print exactly this."""
    return not any(m.group("bound") or m.group("low") is not None for m in _SLOT.finditer(claim))


def figure_problems(entry, stdout: str) -> list:
    """Where the entry's `figures`, its prose and what its snippet printed disagree: each claim must
    be stated in the text and hold for the printed value (on any device: a claim that moves is a
    range or a bound)."""
    listed, printed, text = entry.figures or {}, printed_figures(stdout), prose(entry)
    problems = []
    for name, claim in listed.items():
        if not states(text, claim):
            problems.append(f"figure {name}: the entry lists {claim!r} but its text never states it")
        if name not in printed:
            problems.append(f"figure {name}: the snippet printed no `figure {name}: ...` line")
        elif not claim_holds(claim, printed[name]):
            problems.append(f"figure {name}: the text says {claim!r} but the snippet printed {printed[name]!r}")
    for name in printed.keys() - listed.keys():
        problems.append(f"figure {name}: printed by the snippet as {printed[name]!r} but not listed in `figures`")
    return problems
