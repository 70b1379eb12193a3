"""What only a comparison of the ranks can show: every rank training on the same batches.

Plain data, no torch: the parent of a torchrun run merges the ranks' reports here (each rank
records what its check KBW036 saw in its report's `run.shared`), and so can anyone holding
the per-rank JSON reports.
"""
from __future__ import annotations

CODE = "KBW036"
NAME = "ranks-read-same-batches"
ENTRY = "rank-divergent-data"
TITLE = "every rank trains on the same batches: the data is not split across ranks"
CONFIDENCE = 0.9
MIN_STEPS = 3   # sampled steps that every rank recorded
SHARE = 0.8     # of which at least this share had identical inputs on every rank
KEEP = 16       # sampled steps a rank records


def cross_rank_findings(reports: list) -> list:
    """Findings (as report dicts) that need two or more ranks' reports to be seen."""
    found = [((r.get("run") or {}).get("shared") or {}).get(CODE) for r in reports]
    shared: list[dict] = [s for s in found if isinstance(s, dict)]
    if len(shared) < 2 or len(shared) != len(found):
        return []
    per_rank = [{int(step): fp for step, fp in s.get("inputs", [])} for s in shared]
    common = sorted(set.intersection(*(set(p) for p in per_rank)))
    if len(common) < MIN_STEPS:
        return []
    same = [step for step in common if len({p[step] for p in per_rank}) == 1]
    if len(same) < SHARE * len(common):
        return []
    site = next((s.get("model_site") for s in shared if s.get("model_site")), None)
    message = (f"all {len(reports)} ranks fed the model the same input batch on {len(same)} of the {len(common)} "
               f"sampled steps they share (from step {same[0]}): every rank trains on the same data, so the world "
               f"size multiplies the work, not the data seen; give the loader a DistributedSampler (or shard "
               f"the data by rank)")
    return [{"code": CODE, "entry": ENTRY, "title": TITLE, "confidence": CONFIDENCE, "message": message,
             "evidence": {"ranks": len(reports), "steps_compared": len(common), "steps_identical": len(same),
                          "first_identical_step": same[0]},
             "where": site, "step": same[0], "rank": None}]
