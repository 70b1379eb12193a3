"""A fork server for snippet runs: torch is imported (and its optimizer path warmed) once, and
each snippet runs in a fresh child forked from that warm process.

Every snippet still runs in a process of its own, as `python script.py` would run it: its own
`__main__`, its own argv and working folder, stdout and stderr to files of its own, torch's
random generators seeded afresh as a new process seeds them, the thread count the environment asks for.
What it no longer pays is torch's start-up (about 2 s) and the first optimizer step's import
of `torch._dynamo` (about 1 s), which were most of a small snippet's time.

Run as `python -m kb_tools.snippets.server` by kb_tools.snippets.runner, which talks to it over the
server's stdin and a private copy of its stdout, one JSON object per line each way:

    request  {"script", "cwd", "stdout", "stderr", "keep": [names], "kept_path", "cpu_limit", "wall_limit",
              "idle_limit": seconds (see _idle), "ranks": N (optional: a `launch: torchrun` snippet, see run_ranks)}
    reply    {"returncode", "signal", "cpu_seconds", "seconds", "timed_out": null | "cpu" | "wall" | "idle"}

Timeouts are in CPU seconds of the child (RLIMIT_CPU, so a loaded machine cannot trip them);
the wall-clock limit is only a backstop for a child that hangs without using the CPU.
The server warms up on one thread (a GNU OpenMP pool does not survive fork), so a child can use
any thread count. The runner sends it only runs that hide every GPU: after torch's start on a
machine with one, a forked child cannot initialise CUDA (runner.fork_server_usable).
"""
from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
import time

WARM_UP = """
import torch, torch.nn as nn, torch.nn.functional as F
import torch.utils.data
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
for opt in (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
            torch.optim.Adam(model.parameters()), torch.optim.AdamW(model.parameters())):
    loss = F.cross_entropy(model(torch.randn(5, 4)), torch.tensor([0, 1, 2, 0, 1]))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _threads_asked() -> int:
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return os.cpu_count() or 1


def warm_up() -> dict:
    """Import what every snippet imports and take one step of the common optimizers; return the
    state a child must get back (what a fresh process would have)."""
    import torch
    state = {"threads": _threads_asked()}
    torch.set_num_threads(1)
    exec(compile(WARM_UP, "<warm-up>", "exec"), {})
    try:
        import numpy  # noqa: F401  (most snippets that use it import it; harmless when they do not)
    except ImportError:
        pass
    return state


def die_with_parent(sig: int, parent: int) -> None:
    """Ask Linux to send `sig` to this process when its parent dies, so that a killed test run
    leaves no server and no snippet burning CPU (prctl PR_SET_PDEATHSIG); and if the parent is
    already gone (it died before the request took effect), go now."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, sig, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the server is Linux-only anyway
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def _trimmed(tb, script: str):
    """The traceback from the script's first frame on, as `python script.py` shows it."""
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    return tb


def _child(request: dict, state: dict, server: int) -> None:
    """Runs in the forked child; never returns."""
    code = 1
    try:
        die_with_parent(signal.SIGKILL, server)  # a server that is killed takes its running snippet along
        os.setpgid(0, 0)  # its own group: a timeout kills the DataLoader workers it started too
        if "env" in request:  # the caller's exact environment (a server serves callers that differ only in
            os.environ.clear()  # variables that do not change how torch imports)
            os.environ.update(request["env"])
        # the ranks of one run share its two files, as torchrun's workers share its terminal
        mode = os.O_APPEND if request.get("shared_output") else os.O_TRUNC
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o600)
            os.dup2(target, fd)
            os.close(target)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        for fd in request.get("close_fds", ()):
            try:
                os.close(fd)
            except OSError:
                pass
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        limit = int(request["cpu_limit"])
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = _run_script(request, state)
    except BaseException:  # noqa: BLE001 - the child reports everything through its exit status
        try:
            import traceback
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _run_script(request: dict, state: dict) -> int:
    import random
    import runpy

    import torch
    script = request["script"]
    os.chdir(request["cwd"])
    sys.argv = [script]
    sys.path[0] = os.path.dirname(script)
    torch.set_num_threads(state["threads"])
    torch.seed()  # a new process seeds torch's and random's generators from the OS, not from a parent
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    try:
        namespace = runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException as exc:  # noqa: BLE001 - printed as the interpreter would print it
        import traceback
        traceback.print_exception(type(exc), exc, _trimmed(exc.__traceback__, script))
        return 1
    if request.get("kept_path"):
        kept = {}
        for name in request.get("keep", ()):
            try:
                kept[name] = [float(v) for v in namespace.get(name, ())]
            except (TypeError, ValueError):
                pass
        with open(request["kept_path"], "w", encoding="utf-8") as fh:
            json.dump(kept, fh)
    return 0


# A deadlocked process is not quite still: a thread waiting for the GIL wakes every 5 ms to ask for it
# again (measured: 0.8% of a core). A snippet (or the ranks of one, together) using less than this
# share of one core over the idle limit is taken as deadlocked; one that works, or waits on a
# process that does, uses far more.
IDLE_SHARE = 0.05


class GroupCPU:
    """CPU seconds used so far by every process in some process groups (a rank and the DataLoader
    workers it started), read from /proc: a rank waiting on a busy worker is not idle. A process
    that has ended keeps what it was last seen to use (and a parent's count includes the children
    it has waited for), so the total never falls when a worker exits: a fall would read as idle."""

    def __init__(self, groups: set):
        self.groups, self.seen = set(groups), {}

    def seconds(self) -> float:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone between the listing and the read
            if int(fields[2]) in self.groups:  # pgrp; then utime, stime, cutime, cstime (fields 14-17)
                ticks = sum(int(f) for f in fields[11:15])
                self.seen[name] = max(self.seen.get(name, 0), ticks)
        return sum(self.seen.values()) / os.sysconf("SC_CLK_TCK")


def _idle(samples: list, now: float, limit: float) -> bool:
    """Whether the (time, CPU seconds) samples of a snippet's processes show them using less than
    IDLE_SHARE of a core over the last `limit` seconds; drops the samples older than needed."""
    while len(samples) > 1 and now - samples[1][0] >= limit:
        samples.pop(0)
    (then, used_then), used_now = samples[0], samples[-1][1]
    return now - then >= limit and used_now - used_then < IDLE_SHARE * (now - then)


def _wait(pid: int, wall_limit: float, idle_limit: float) -> tuple:
    """(status, rusage, timed_out): wait for the child, killing its group past the wall backstop
    or once it has used almost no CPU for `idle_limit` seconds (a deadlock, see IDLE_SHARE)."""
    deadline = time.monotonic() + wall_limit
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    samples, meter = [], GroupCPU({pid})
    try:
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, usage, None
            now = time.monotonic()
            if not samples or now - samples[-1][0] >= 1.0:
                samples.append((now, meter.seconds()))
            timed_out = "wall" if now >= deadline else "idle" if _idle(samples, now, idle_limit) else None
            if timed_out:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, usage = os.wait4(pid, 0)
                return status, usage, timed_out
            if pidfd is not None:
                select.select([pidfd], [], [], min(deadline - now, 1.0))
            else:
                time.sleep(min(deadline - now, 0.02))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _reap_group(pid: int) -> None:
    """A child's leftover processes (a DataLoader worker it did not join) do not outlive it."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _hit_cpu_limit(sig, usage, request: dict) -> bool:
    """Whether a child was killed by its CPU-time limit (RLIMIT_CPU: SIGXCPU, then SIGKILL)."""
    return sig in (signal.SIGXCPU, signal.SIGKILL) and usage.ru_utime + usage.ru_stime >= float(request["cpu_limit"]) - 1


def run_one(request: dict, state: dict, protocol_fd: int) -> dict:
    start = time.perf_counter()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        request = dict(request, close_fds=[protocol_fd])
        _child(request, state, server)
    status, usage, timed_out = _wait(pid, float(request["wall_limit"]), float(request["idle_limit"]))
    _reap_group(pid)
    seconds = time.perf_counter() - start
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if timed_out is None and _hit_cpu_limit(sig, usage, request):
        timed_out = "cpu"
    returncode = -sig if sig is not None else os.WEXITSTATUS(status)
    return {"returncode": returncode, "signal": sig, "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            "seconds": round(seconds, 3), "timed_out": timed_out}


def torchrun_env(env: dict, rank: int, world: int, port: int, run_id: str, folder: str) -> dict:
    """The environment `torchrun --standalone --nproc-per-node <world>` gives its worker `rank`
    (torch.distributed's LocalElasticAgent and run.py; tests/test_snippet_server.py compares the
    two), except that rank 0 hosts the store torchrun's agent would host: what
    `init_process_group()` and the snippets read."""
    error_file = os.path.join(folder, "torchelastic", str(rank), "error.json")  # where @record writes
    os.makedirs(os.path.dirname(error_file), exist_ok=True)
    worker = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0", ROLE_RANK=str(rank),
                  ROLE_NAME="default", LOCAL_WORLD_SIZE=str(world), WORLD_SIZE=str(world), GROUP_WORLD_SIZE="1",
                  ROLE_WORLD_SIZE=str(world), MASTER_ADDR="localhost", MASTER_PORT=str(port),
                  TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0", TORCHELASTIC_RUN_ID=run_id,
                  TORCHELASTIC_USE_AGENT_STORE="False", TORCHELASTIC_ERROR_FILE=error_file,
                  TORCHELASTIC_SIGNALS_TO_HANDLE="SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    worker.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    worker.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default for more than one process per node
    return worker


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


RANK_GRACE = 2.0  # seconds the other ranks get to finish after one fails, before they are killed


def run_ranks(request: dict, state: dict, protocol_fd: int) -> dict:
    """A `launch: torchrun` snippet: `ranks` children forked from this warm process instead of
    torchrun's fresh interpreters (three imports of torch), each with the environment torchrun
    gives its workers, all writing to the run's stdout and stderr. As under torchrun, the run
    fails when any rank fails, and the ranks still running are then stopped (after RANK_GRACE).
    Ranks that together use almost no CPU (IDLE_SHARE) for `idle_limit` seconds are deadlocked:
    they are stopped and the run is reported as timed out "idle" (see runner.IDLE_LIMIT)."""
    start = time.perf_counter()
    server, world, port = os.getpid(), int(request["ranks"]), _free_port()
    for path in (request["stdout"], request["stderr"]):
        open(path, "w").close()
    pids = []
    for rank in range(world):
        env = torchrun_env(request["env"], rank, world, port, f"kb-{server}-{port}", request["cwd"])
        pid = os.fork()
        if pid == 0:
            _child(dict(request, env=env, shared_output=True, close_fds=[protocol_fd]), state, server)
        pids.append(pid)
    deadline, stop_at = time.monotonic() + float(request["wall_limit"]), None
    done, failed, timed_out, cpu = {}, None, None, 0.0
    samples, sampled, probe_at = [], set(), 0.0
    while len(done) < world:
        for pid in pids:
            if pid in done:
                continue
            finished, status, usage = os.wait4(pid, os.WNOHANG)
            if not finished:
                continue
            done[pid] = status
            cpu += usage.ru_utime + usage.ru_stime
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            if stop_at is None and _hit_cpu_limit(sig, usage, request):
                timed_out = "cpu"
            if failed is None and (sig is not None or os.WEXITSTATUS(status) != 0):
                failed, stop_at = status, time.monotonic() + RANK_GRACE
        now = time.monotonic()
        if len(done) < world and stop_at is None and now >= probe_at:
            probe_at, running = now + 1.0, {pid for pid in pids if pid not in done}
            if running != sampled:  # a rank ended: its CPU no longer counts
                samples, sampled, meter = [], running, GroupCPU(running)
            samples.append((now, meter.seconds()))
            if _idle(samples, now, float(request["idle_limit"])):
                timed_out, stop_at = "idle", now
        if len(done) < world and (now >= deadline or (stop_at is not None and now >= stop_at)):
            if now >= deadline and stop_at is None:
                timed_out = "wall"
            stop_at = now  # a rank that outlived the others' failure or the backstop is killed
            for pid in pids:
                if pid not in done:
                    _reap_group(pid)
        time.sleep(0.01)
    for pid in pids:
        _reap_group(pid)
    status = failed if failed is not None else done[pids[0]]
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    returncode = -sig if sig is not None else os.WEXITSTATUS(status)
    if timed_out in ("wall", "idle") and failed is None:
        returncode, sig = -signal.SIGKILL, signal.SIGKILL
    return {"returncode": returncode, "signal": sig, "cpu_seconds": round(cpu, 3),
            "seconds": round(time.perf_counter() - start, 3), "timed_out": timed_out}


def serve() -> None:
    # the protocol gets a private copy of stdout; fd 1 itself goes to stderr, so nothing that
    # torch or the warm-up prints can corrupt a reply
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    die_with_parent(signal.SIGTERM, os.getppid())  # a killed test worker takes its server along
    state = warm_up()
    protocol.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        run = run_ranks if request.get("ranks", 1) > 1 else run_one
        reply = run(request, state, protocol.fileno())
        protocol.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    serve()
