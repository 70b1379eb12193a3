"""What `kb watch` costs a training step: a small CNN and a small transformer trained for the same
steps with and without watching, in the same invocation.

Each model trains in blocks of --steps steps in four modes, their order rotating from round to
round so that load on a shared machine falls on all alike: unwatched; unwatched again (the A/A
control: how far two identical modes differ here, the noise floor of the comparison); watched
with the default sampling; and watched with every step sampled (the cost of a sampled step).
Each step is timed twice: wall time, and the process's CPU time, which other people's work on a
shared machine inflates less (with --threads 1 on CPU it is the step's own cost; on CUDA only
wall time means anything). Each watched mode is one Session with every check, installed for its
blocks and removed for the others, so its step counter and sampling run on as in one long run.
Reported per model and clock: each mode's mean step time and its change from the unwatched mean
(the cost over a long run), and the first 10 steps of the default session, all of them sampled.
Also each mode's minor page faults per step: on a CPU, glibc's allocator may hand a step's freed
memory back to the system and fault it in again on the next step, and whether a process falls
into that pattern varies from process to process and with what else allocates; a mode with many
more faults than plain is paying for that, not for the checks' own work.

Because that pattern is drawn per process, --processes N repeats the whole measurement in N fresh
processes, one after another, and reports each mode's change from unwatched as the median and the
range over them (each process's own ratio is still against the unwatched steps of that process).

    python bench/watch_overhead.py [--steps 100] [--rounds 4] [--every 10] [--threads 1] [--device cpu]
                                   [--size small|medium] [--model both|cnn|transformer]
                                   [--processes N] [--count-ops] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

try:
    import resource
except ImportError:  # not on Windows: page faults are then not counted
    resource = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
from torch import nn  # noqa: E402

from kb_tools.watch.session import DEFAULT_EVERY, Session  # noqa: E402


class SmallCNN(nn.Module):
    def __init__(self, classes=10, width=16):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1), nn.BatchNorm2d(2 * w), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.BatchNorm2d(4 * w), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(4 * w, classes))

    def forward(self, x):
        return self.head(self.features(x))


class SmallTransformer(nn.Module):
    def __init__(self, vocab=1000, d_model=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(seq, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        causal = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        h = self.encoder(self.embed(tokens) + self.pos, mask=causal, is_causal=True)
        return self.lm_head(self.norm(h))


# --size: the models' shapes. "small" steps take a few ms on a GPU, where launching the kernels, not
# running them, sets the pace; "medium" ones are closer to a real GPU job's step.
SIZES = {
    "small": {"cnn": {"width": 16, "image": 32, "batch": 32},
              "transformer": {"vocab": 1000, "d_model": 64, "heads": 4, "layers": 2, "seq": 32, "batch": 16}},
    "medium": {"cnn": {"width": 64, "image": 64, "batch": 128},
               "transformer": {"vocab": 8000, "d_model": 512, "heads": 8, "layers": 6, "seq": 256, "batch": 16}},
}
SIZE = "small"


def cnn_setup(device):
    torch.manual_seed(0)
    shape = SIZES[SIZE]["cnn"]
    model = SmallCNN(width=shape["width"]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    x = torch.randn(shape["batch"], 3, shape["image"], shape["image"], device=device)
    y = torch.randint(0, 10, (shape["batch"],), device=device)

    def step():
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    return step


def transformer_setup(device):
    torch.manual_seed(0)
    shape = SIZES[SIZE]["transformer"]
    model = SmallTransformer(shape["vocab"], shape["d_model"], shape["heads"], shape["layers"], shape["seq"]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, shape["vocab"], (shape["batch"], shape["seq"] + 1), device=device)
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step():
        optimizer.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()
    return step


def minor_faults() -> int:
    """The process's minor page faults so far (0 where the platform does not count them)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource is not None else 0


def timed_block(step, steps: int, sync) -> tuple:
    """(wall seconds, CPU seconds) of each of `steps` steps."""
    wall, cpu = [], []
    for _ in range(steps):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        sync()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu


MODES = ("plain", "plain again", "watched", "every step")


def measure(name: str, setup, steps: int, rounds: int, every: int, device: str) -> dict:
    step = setup(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    timed_block(step, 10, sync)  # allocator and kernels warm before anything is timed
    sessions = {"watched": Session(every=every), "every step": Session(every=1)}
    sessions["watched"].install()
    first = timed_block(step, sessions["watched"].warmup, sync)  # its warmup steps: every one sampled
    sessions["watched"].uninstall()
    plain_first = timed_block(step, sessions["watched"].warmup, sync)
    times = {mode: ([], []) for mode in MODES}
    faults = dict.fromkeys(MODES, 0)
    for r in range(rounds):
        for mode in MODES[r % 4:] + MODES[:r % 4]:
            session = sessions.get(mode)
            if session is not None:
                session.install()
            before = minor_faults()
            wall, cpu = timed_block(step, steps, sync)
            faults[mode] += minor_faults() - before
            if session is not None:
                session.uninstall()
            times[mode][0].extend(wall)
            times[mode][1].extend(cpu)
    ms = lambda xs: 1e3 * statistics.fmean(xs)  # noqa: E731
    out = {"model": name, "device": device, "steps_per_mode": len(times["plain"][0]), "every": every,
           "sampled_steps": sessions["watched"].sampled_steps,
           "findings": sorted({f["code"] for s in sessions.values() for f in s.findings()}),
           "page_faults_per_step": {mode: faults[mode] / len(times[mode][0]) for mode in MODES}}
    for i, clock in enumerate(("wall", "cpu")):
        base = ms(times["plain"][i])
        out[clock] = {mode: {"mean_ms": ms(times[mode][i]), "ratio": ms(times[mode][i]) / base} for mode in MODES}
        out[clock]["first 10 steps"] = {"mean_ms": ms(first[i]), "ratio": ms(first[i]) / ms(plain_first[i])}
    return out


def count_ops(setup, every: int, steps: int = 100) -> dict:
    """The aten ops the checks themselves issue per step (a TorchDispatchMode attributes each op to
    the innermost kb_tools frame; the user's own ops that pass through kb watch's wrappers are not
    counted), with the accelerator's code path taken on the CPU: on a GPU each such op is a kernel
    launch or a dispatcher call on the step's critical path, whatever the machine's load. Row
    fingerprints, read on the CPU only for inputs in host memory, are left out."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from kb_tools.watch.checks import kbw006_nonfinite
    counted = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            frame = sys._getframe(1)
            while frame is not None:
                code = frame.f_code
                if "kb_tools" in code.co_filename:
                    user_op = code.co_filename.endswith("hooks.py") and code.co_name in ("backward", "wrapper")
                    counted[0] += not user_op and code.co_name != "row_fingerprints"
                    break
                frame = frame.f_back
            return func(*args, **(kwargs or {}))

    read_at_once = kbw006_nonfinite._read_at_once
    kbw006_nonfinite._read_at_once = lambda t: False  # the accelerator's path
    try:
        step = setup("cpu")
        session = Session(every=every)
        session.install()
        for _ in range(2 * session.warmup):
            step()
        with Count():
            for _ in range(steps):
                step()
        session.uninstall()
    finally:
        kbw006_nonfinite._read_at_once = read_at_once
    return {"every": every, "ops_per_step": counted[0] / steps}


def without_option(argv: list, name: str) -> list:
    """`argv` without the option `name` and its value (as `--name V` or `--name=V`)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out


def across_processes(args, argv: list) -> int:
    """The measurement repeated in args.processes fresh processes: each mode's change from unwatched
    (CPU time on the CPU, wall time on CUDA) as the median and the range over the processes."""
    child = [sys.executable, os.path.abspath(__file__), *without_option(without_option(argv, "--processes"), "--json"),
             "--json"]
    runs = []
    for i in range(args.processes):
        print(f"[process {i + 1}/{args.processes}]", file=sys.stderr, flush=True)
        done = subprocess.run(child, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"watch_overhead: process {i + 1} failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        runs.append(json.loads(done.stdout))
    clock = "cpu" if args.device == "cpu" else "wall"
    summary = []
    for index, first in enumerate(runs[0]):
        row = {"model": first["model"], "clock": clock, "processes": len(runs), "modes": {}}
        for mode in (*MODES[1:], "first 10 steps"):
            changes = sorted(run[index][clock][mode]["ratio"] - 1 for run in runs)
            row["modes"][mode] = {"median": statistics.median(changes), "min": changes[0], "max": changes[-1],
                                  "each": changes}
        faults = {mode: statistics.median(run[index]["page_faults_per_step"][mode] for run in runs) for mode in MODES}
        row["median_page_faults_per_step"] = faults
        summary.append(row)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"torch {torch.__version__}, {args.device}, {args.threads} thread(s), every {args.every}, "
          f"{len(runs)} processes; {clock} time, change from unwatched: median [min, max]")
    for row in summary:
        print(row["model"])
        for mode, m in row["modes"].items():
            above = sum(c > 0.10 for c in m["each"])
            print(f"  {mode:14} {m['median']:+.1%} [{m['min']:+.1%}, {m['max']:+.1%}]  above +10% in {above} of {len(runs)}")
        print("  page faults per step, median: " + "; ".join(
            f"{mode} {n:.0f}" for mode, n in row["median_page_faults_per_step"].items()))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="steps per block (default 100)")
    parser.add_argument("--rounds", type=int, default=4, help="blocks of each mode per model (default 4)")
    parser.add_argument("--every", type=int, default=DEFAULT_EVERY, help="sampling period after the first 10 steps")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: CPU time is then "
                        "the step's own)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--size", choices=tuple(SIZES), default="small",
                        help="the models' shapes (default small; medium is meant for a GPU)")
    parser.add_argument("--count-ops", action="store_true",
                        help="count the ops the checks issue per step (unsampled steps, and default sampling) "
                             "instead of timing")
    parser.add_argument("--model", choices=("both", "cnn", "transformer"), default="both",
                        help="which model to time (default both)")
    parser.add_argument("--processes", type=int, default=1,
                        help="repeat the measurement in N fresh processes and report the median and range of "
                             "each mode's change (the allocator's page-fault pattern differs per process)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error(f"--processes: expected at least 1, got {args.processes}")
    if args.processes > 1 and not args.count_ops:
        return across_processes(args, argv if argv is not None else sys.argv[1:])
    global SIZE
    SIZE = args.size
    torch.set_num_threads(args.threads)
    if args.count_ops:
        counts = {name: [count_ops(setup, every) for every in (10 ** 9, args.every)]
                  for name, setup in (("CNN", cnn_setup), ("transformer", transformer_setup))}
        if args.json:
            print(json.dumps(counts, indent=2))
        else:
            for name, (unsampled, default) in counts.items():
                print(f"{SIZE} {name}: {unsampled['ops_per_step']:.1f} ops per unsampled step, "
                      f"{default['ops_per_step']:.1f} per step with every {args.every}")
        return 0
    c, t = SIZES[SIZE]["cnn"], SIZES[SIZE]["transformer"]
    results = []
    if args.model in ("both", "cnn"):
        results.append(measure(f"{SIZE} CNN (3 conv + BN, widths {c['width']}-{4 * c['width']}, "
                               f"{c['image']}x{c['image']}x3, batch {c['batch']})",
                               cnn_setup, args.steps, args.rounds, args.every, args.device))
    if args.model in ("both", "transformer"):
        results.append(measure(f"{SIZE} transformer ({t['layers']} layers, d {t['d_model']}, seq {t['seq']}, "
                               f"batch {t['batch']}, vocab {t['vocab']})",
                               transformer_setup, args.steps, args.rounds, args.every, args.device))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"torch {torch.__version__}, {args.device}, {args.threads} thread(s), every {args.every}, "
          f"{results[0]['steps_per_mode']} steps per mode, interleaved")
    for r in results:
        print(r["model"] + f"  (findings: {', '.join(r['findings']) or 'none'})")
        for clock in ("cpu", "wall") if args.device == "cpu" else ("wall",):
            c = r[clock]
            print(f"  {clock:4} mean step: " + "; ".join(
                f"{mode} {c[mode]['mean_ms']:.2f} ms" + ("" if mode == "plain" else f" ({c[mode]['ratio'] - 1:+.1%})")
                for mode in (*MODES, "first 10 steps")))
        if resource is not None:
            print("  page faults per step: " + "; ".join(f"{mode} {n:.0f}" for mode, n in r["page_faults_per_step"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
