"""The committed record of snippet runs (kb/verified/) and the loss curves drawn from it.

The snippet test run writes (into record_dir: build/verified, or kb/verified under `make record`)
`results.json` (per entry, per device: the last outcome, its
date, torch and Python versions and the sha256 of the snippet text that ran) and
`curves/<id>.json` (the bug's and the fix's per-step losses). `kb build` reads both, so a
fresh build shows when and where each snippet last passed without running any snippet.

Form of results.json:

    {"format": 1, "entries": {id: {device: {"outcome": "passed" | "failed", "date": ISO UTC,
      "torch": str, "python": str, "snippet_sha256": hex, "last_passed": {...}?}}}}

`device` is "cpu" or the CUDA device's name. Only pure-Python imports here.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
import os

from kb_tools.core.util import KBError, is_hex, write_atomic

DIR_NAME = "verified"
RESULTS_FILE = "results.json"
CURVES_DIR = "curves"
FORMAT = 1
OUTCOMES = ("passed", "failed")
RUN_FIELDS = ("date", "torch", "python", "snippet_sha256")
CURVE_NAMES = ("bug_losses", "fix_losses")  # module globals a training snippet keeps
MAX_POINTS = 100


class VerifiedError(KBError):
    """The record of verified runs is unreadable or malformed; the message names file and field."""


RECORD_VAR = "KB_RECORD_DIR"


def default_dir(kb_root: str) -> str:
    """The committed record the site reads: <kb>/verified."""
    return os.path.join(kb_root, DIR_NAME)


def record_dir(kb_root: str) -> str:
    """Where a snippet test run writes what it saw: $KB_RECORD_DIR when set (`make record` sets it to
    the committed kb/verified), else build/verified beside the KB, which git ignores: a test run never
    changes the checkout."""
    chosen = os.environ.get(RECORD_VAR)
    if chosen:
        return os.path.abspath(chosen)
    return os.path.join(os.path.dirname(os.path.abspath(kb_root)), "build", DIR_NAME)


def snippet_sha256(text: str) -> str:
    """What a record vouches for: the exact snippet text that ran."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- reading

def _check_run(path: str, where: str, run, outcome: bool) -> None:
    if not isinstance(run, dict):
        raise VerifiedError(f"{path}: {where}: expected an object")
    fields = (("outcome",) if outcome else ()) + RUN_FIELDS
    for field in fields:
        value = run.get(field)
        if field == "outcome" and value not in OUTCOMES:
            raise VerifiedError(f"{path}: {where}.outcome: expected \"passed\" or \"failed\", got {value!r}")
        if field == "snippet_sha256" and not is_hex(value, 64):
            raise VerifiedError(f"{path}: {where}.snippet_sha256: expected 64 lower-case hex digits")
        if not isinstance(value, str) or not value:
            raise VerifiedError(f"{path}: {where}.{field}: expected a non-empty string")


def _read_json(path: str, what: str):
    """The decoded JSON at `path`; unreadable or malformed is one VerifiedError naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise VerifiedError(f"{path}: cannot read {what}: {exc}") from None


def load_results(path: str | None) -> dict | None:
    """{id: {device: run}} from results.json, or None when there is no such file."""
    if not path or not os.path.exists(path):
        return None
    data = _read_json(path, "the verified runs")
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
        raise VerifiedError(f"{path}: not a verified-runs file (expected {{\"format\": {FORMAT}, \"entries\": {{...}}}})")
    for entry_id, devices in data["entries"].items():
        if not isinstance(devices, dict):
            raise VerifiedError(f"{path}: entries.{entry_id}: expected an object of devices")
        for device, run in devices.items():
            _check_run(path, f"entries.{entry_id}.{device}", run, outcome=True)
            if "last_passed" in run:
                _check_run(path, f"entries.{entry_id}.{device}.last_passed", run["last_passed"], outcome=False)
    return data["entries"]


def merge(earlier: dict, runs: dict) -> dict:
    """`earlier` with `runs` ({(id, device): run}) laid over it, one (id, device) at a time:
    other entries and other devices keep their records; a failure keeps the last pass."""
    out = {k: dict(v) for k, v in (earlier or {}).items()}
    for (entry_id, device), run in runs.items():
        before = out.setdefault(entry_id, {}).get(device)
        run = dict(run)
        if run["outcome"] != "passed" and before:
            last = {k: before[k] for k in RUN_FIELDS} if before.get("outcome") == "passed" \
                else before.get("last_passed")
            if last:
                run["last_passed"] = last
        out[entry_id][device] = run
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def record(runs: dict, directory: str) -> str:
    """Merge `runs` into <directory>/results.json (atomically); returns its path.

    An unreadable earlier file is an error rather than silently dropped: it holds the
    records of other devices that this run cannot recreate."""
    path = os.path.join(directory, RESULTS_FILE)
    merged = merge(load_results(path) or {}, runs)
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, json.dumps({"format": FORMAT, "entries": merged}, indent=1, sort_keys=True) + "\n")
    return path


# ---------------------------------------------------------------- status on the page

def _when(run: dict) -> str:
    return run["date"][:16].replace("T", " ") + " UTC"


def _devices_and_torch(devices: list, runs: dict) -> str:
    """"cpu, GPU with torch T", or each device with its own torch when the runs used different
    releases (a GPU machine's torch is often not the pinned CPU one), so no run is misdated."""
    releases = list(dict.fromkeys(runs[d]["torch"] for d in devices))
    if len(releases) == 1:
        return f"{', '.join(devices)} with torch {releases[0]}"
    return "; ".join(f"{d} with torch {runs[d]['torch']}" for d in devices)


def status(entry_id: str, current_sha: str, runs: dict | None, distributed: bool = False) -> dict:
    """What an entry page says about its snippet: kind (the admonition type), title, lines, and
    `date` (YYYY-MM-DD of the latest run of this snippet text, for the badge; '' if none).
    `distributed`: a torchrun snippet, whose CPU run used the gloo backend, so a title without a
    GPU run says that NCCL was not run."""
    mine = (runs or {}).get(entry_id) or {}
    mine = dict(sorted(mine.items(), key=lambda dr: (dr[0] != "cpu", dr[0])))  # cpu first, then GPUs
    now = {d: r for d, r in mine.items() if r["snippet_sha256"] == current_sha}
    failed = [d for d, r in now.items() if r["outcome"] != "passed"]
    passed = [d for d, r in now.items() if r["outcome"] == "passed"]
    lines = []
    for d, r in now.items():
        lines.append(f"{d}: {r['outcome']} on {_when(r)}, torch {r['torch']}, Python {r['python']}")
        last = r.get("last_passed")
        if r["outcome"] != "passed" and last:
            changed = "" if last["snippet_sha256"] == current_sha else " (an earlier version of the snippet)"
            lines.append(f"{d}: last passed on {_when(last)}, torch {last['torch']}{changed}")
    date = max((r["date"][:10] for r in now.values()), default="")
    gloo = " (gloo on CPU; NCCL not run)" if distributed and all(d == "cpu" for d in now) else ""
    if failed:
        return {"kind": "failure", "title": f"Failed on {_devices_and_torch(failed, now)}{gloo}", "lines": lines,
                "date": date}
    if passed:
        return {"kind": "success", "title": f"Passed on {_devices_and_torch(passed, now)}{gloo}", "lines": lines,
                "date": date}
    older = []
    for d, r in mine.items():
        last = r if r["outcome"] == "passed" else r.get("last_passed")
        if last:
            older.append(f"{d}: passed on {_when(last)}, torch {last['torch']}, Python {last['python']}, "
                         "with an earlier version of the snippet")
    if older:
        return {"kind": "warning", "title": "Changed since it last passed", "lines": older
                + ["The snippet text differs from the one that passed; no run has checked this version yet."],
                "date": ""}
    return {"kind": "danger", "title": "Never passed",
            "lines": ["No recorded run of this snippet has passed on any device."], "date": ""}


# ---------------------------------------------------------------- curves

def _number(value):
    """A float for the JSON file; None for NaN or an infinity (drawn as a gap)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def thin(values, limit: int = MAX_POINTS) -> list:
    """[(step, value)] with at most `limit` points that keeps each stretch's lowest and
    highest value, so a spike, a plateau or a floor survives the thinning."""
    points = [(i, _number(v)) for i, v in enumerate(values)]
    if len(points) <= limit:
        return points
    buckets = max(1, (limit - 2) // 2)
    out = [points[0], points[-1]]  # the first and the last step always
    for b in range(buckets):
        chunk = points[b * len(points) // buckets:(b + 1) * len(points) // buckets]
        if not chunk:
            continue
        gaps = [p for p in chunk if p[1] is None]
        finite = [p for p in chunk if p[1] is not None]
        keep = {chunk[0], chunk[-1]} if not finite else \
            {min(finite, key=lambda p: p[1]), max(finite, key=lambda p: p[1])}
        if gaps:
            keep = {min(keep), gaps[0]}
        out.extend(keep)
    return sorted(set(out))


def curves_from(namespace: dict) -> dict | None:
    """{"bug": [[step, loss|None]], "fix": [...]} from a finished snippet's globals, or None
    when it does not keep both lists."""
    got = {}
    for name in CURVE_NAMES:
        values = namespace.get(name)
        if not isinstance(values, (list, tuple)) or not values:
            return None
        try:
            got[name.split("_")[0]] = [[i, v] for i, v in thin(list(values))]
        except TypeError:
            return None
    return got


def write_curves(directory: str, entry_id: str, curves: dict, sha: str, torch_version: str) -> str:
    path = os.path.join(directory, CURVES_DIR, f"{entry_id}.json")
    curves = {k: [[int(s), _number(v)] for s, v in curves[k]] for k in ("bug", "fix")}  # NaN/inf -> null
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, json.dumps({"format": FORMAT, "snippet_sha256": sha, "torch": torch_version, **curves},
                                  separators=(",", ":")) + "\n")
    return path


def load_curves(directory: str | None, entry_id: str) -> dict | None:
    """The entry's curves file, or None; a malformed one is an error naming file and field."""
    if not directory:
        return None
    path = os.path.join(directory, CURVES_DIR, f"{entry_id}.json")
    if not os.path.exists(path):
        return None
    data = _read_json(path, "the loss curves")
    if not isinstance(data, dict):
        raise VerifiedError(f"{path}: expected an object with \"bug\" and \"fix\"")
    for name in ("bug", "fix"):
        points = data.get(name)
        if not isinstance(points, list):
            raise VerifiedError(f"{path}: {name}: expected a non-empty list of [step, loss or null]")
        ok = points and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and not isinstance(p[0], bool)
            and (p[1] is None or (isinstance(p[1], (int, float)) and not isinstance(p[1], bool)
                                  and math.isfinite(p[1]))) for p in points)
        if not ok:
            raise VerifiedError(f"{path}: {name}: expected a non-empty list of [step, loss or null]")
        if len(points) > MAX_POINTS:  # the page inlines every point; the test run thins them
            raise VerifiedError(f"{path}: {name}: {len(points)} points, more than {MAX_POINTS}")
    return data


# ---------------------------------------------------------------- the picture

W, H = 560, 260
# room for tick labels drawn up to 19 units tall (kb-site.js enlarges them on narrow screens)
LEFT, RIGHT, TOP, BOTTOM = 84, 16, 36, 52


def _ticks(lo: float, hi: float, log: bool) -> list:
    if log:
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        every = max(1, math.ceil((last - first) / 5))  # at most six labels, however many decades
        return [10.0 ** k for k in range(first, last + 1, every)]
    span = hi - lo or abs(hi) or 1.0
    step = 10 ** math.floor(math.log10(span / 4))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= 5:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def svg(curves: dict, entry_id: str) -> str:
    """Both curves as an inline SVG: bug and fix polylines, axes for step and loss (log
    when the losses span more than two decades), a marker where a loss was NaN or inf."""
    series = {"bug": curves["bug"], "fix": curves["fix"]}
    finite = [v for pts in series.values() for _, v in pts if v is not None]
    steps = [s for pts in series.values() for s, _ in pts]
    smax = max(max(steps), 1)
    if finite:
        lo, hi = min(finite), max(finite)
    else:
        lo, hi = 0.0, 1.0
    log = bool(finite) and lo > 0 and hi / lo > 100
    if log:
        lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
    elif hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    else:
        pad = (hi - lo) * 0.05
        lo, hi = (0.0 if lo >= 0 and lo - pad < 0 else lo - pad), hi + pad

    def y(v):
        t = (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) if log else (v - lo) / (hi - lo)
        return TOP + (1 - t) * (H - TOP - BOTTOM)

    def x(s):
        return LEFT + s / smax * (W - LEFT - RIGHT)

    def describe(name, pts):
        vals = [v for _, v in pts if v is not None]
        bad = len(pts) - len(vals)
        text = f"{name}: {_fmt(vals[0])} to {_fmt(vals[-1])}" if vals else f"{name}: no finite loss"
        return text + (f", {bad} NaN or inf point{'s' if bad > 1 else ''}" if bad else "")

    label = (f"Loss per step of the {entry_id} snippet, planted bug against fix; "
             f"{describe('bug', series['bug'])}; {describe('fix', series['fix'])}"
             f"{'; log scale' if log else ''}.")
    e = html.escape
    out = [f'<svg class="kb-curves" role="img" viewBox="0 0 {W} {H}" aria-labelledby="kb-curves-title" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f'<title id="kb-curves-title">{e(label)}</title>',
           f'<line class="kb-axis" x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}"/>',
           f'<line class="kb-axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}"/>']
    for t in _ticks(lo, hi, log):
        if lo - 1e-12 <= t <= hi + 1e-12:
            out.append(f'<text class="kb-tick" x="{LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{e(_fmt(t))}</text>')
    for s in sorted({0, smax // 2, smax}):
        out.append(f'<text class="kb-tick" x="{x(s):.1f}" y="{H - BOTTOM + 21}" text-anchor="middle">{s}</text>')
    out.append(f'<text class="kb-axis-label" x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 6}" text-anchor="middle">step</text>')
    out.append(f'<text class="kb-axis-label" x="14" y="{(TOP + H - BOTTOM) / 2:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2:.0f})">loss{" (log)" if log else ""}</text>')
    for name, pts in series.items():
        runs, current = [], []
        for s, v in pts:
            if v is None or (log and v <= 0):
                if current:
                    runs.append(current)
                current = []
                out.append(f'<text class="kb-gap kb-{name}" x="{x(s):.1f}" y="{TOP + 4}" text-anchor="middle">×</text>')
            else:
                current.append(f"{x(s):.1f},{y(v):.1f}")
        if current:
            runs.append(current)
        for run in runs:
            if len(run) == 1:
                cx, cy = run[0].split(",")
                out.append(f'<circle class="kb-curve kb-{name}" cx="{cx}" cy="{cy}" r="2"/>')
            else:
                out.append(f'<polyline class="kb-curve kb-{name}" fill="none" points="{" ".join(run)}"/>')
    for i, (name, text) in enumerate((("bug", "planted bug"), ("fix", "with the fix"))):
        lx, ly = LEFT + i * 170, 14  # one row above the plot, clear of both curves
        out.append(f'<line class="kb-curve kb-{name}" x1="{lx}" y1="{ly}" x2="{lx + 22}" y2="{ly}"/>')
        out.append(f'<text class="kb-legend" x="{lx + 28}" y="{ly + 5}">{text}</text>')
    if any(v is None for pts in series.values() for _, v in pts):
        out.append(f'<text class="kb-legend" x="4" y="{H - 6}">× loss NaN or inf</text>')
    out.append("</svg>")
    return "".join(out)
