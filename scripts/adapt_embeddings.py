"""Adapt the static token vectors to this KB's causes (step 3, after scripts/tune_embeddings.py),
and write them to kb_tools/embeddings/.

Not run by the tools or the tests: the output is committed. The tuned table (step 2) places a
sentence where the whole model would, but the model knows nothing of which words point to which
of this KB's causes: "my model ends with nn.Softmax and the loss barely moves" is as close to a
dozen generic loss entries as to double-softmax. This step teaches the table that, from reports
written for the purpose: scripts/data/synthetic_reports.yaml holds, for every entry, short,
medium and long descriptions of what a user with that bug would write before knowing the cause.
They were written for this project from each entry's own text, not taken from users, and the
real-report splits (tests/real_reports/) were not read to write them, so those splits still
measure the result.

The dense side of `kb search` scores an entry by its best line (title or symptom line), so the
fit does the same: each report's entry scores are its best-line cosines over a temperature
(TAU), and the loss is their cross-entropy against the report's entry, plus a penalty that
keeps each row near the tuned table (words the reports do not use stay as they were). Full-batch
Adam, seeded; needs torch and numpy:

    python scripts/adapt_embeddings.py --base <step 2's folder> [--holdout 0.2]

`--real FILE` (repeatable) adds labelled real users' reports ({queries: [{query, expect}]}, e.g.
scripts/data/real_reports_train.yaml and the dev split; the frozen test split is refused). Each
may name several acceptable entries, so its loss asks for any of them; `--real-weight` sets the
real reports' mean loss against the self-written reports' mean loss. bench/adapt_cv.py measures
what they add, cross-validated by thread.

`--tau`, `--keep`, `--stay`, `--epochs`, `--lr` and `--seed` are the fit's settings (the defaults are the
shipped fit's); `--lexical-weight` fits the dense side beside the lexical one (each report's
entry logits get the lexical scores too, so the fit spends itself on what the lexical side misses);
`--device cuda` runs a fit on a GPU, for cross-validation runs (bench/adapt_cv.py --device). None
of these changed the shipped files: cross-validated, none beat the defaults (BENCHMARKS.md).

`--holdout` keeps a share of the reports out of the fit and prints how often their entry is in
the top 3 before and after, to choose the epochs without the real-report splits. It prints each
written file's sha256 (kb_tools/embeddings/README.md lists them).
"""
from __future__ import annotations

import argparse
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.search import index as search_index  # noqa: E402
from kb_tools.search import rank as search_rank  # noqa: E402
from kb_tools.search.embedders import static as embed
from tune_embeddings import write_table  # noqa: E402  (scripts/ is on the path: it is this file's folder)

REPORTS = os.path.join(ROOT, "scripts", "data", "synthetic_reports.yaml")
TAU = 0.1
SEED = 0


def load_reports(path: str, known: set) -> list:
    """(report, entry id) pairs; every id must be an entry of the KB."""
    import yaml
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)["reports"]
    unknown = sorted(set(data) - known)
    if unknown:
        sys.exit(f"adapt_embeddings: {path}: no such entries: {', '.join(unknown)}")
    return [(text, eid) for eid, texts in data.items() for text in texts]


# the real reports that measure the vectors: the frozen test split, and those collected after the fit
MEASURING = [os.path.join(ROOT, "tests", "real_reports", name) for name in ("test.yaml", "fresh.yaml", "fresh2.yaml")]


def load_real(path: str, known: set) -> list:
    """(report, [acceptable entry ids]) pairs from a labelled real-report file; a report from a
    thread of a measuring set is refused (those are reported on, never fitted on)."""
    import yaml
    from split_reports import thread_key
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)["queries"]
    unknown = sorted({e for q in data for e in q["expect"]} - known)
    if unknown:
        sys.exit(f"adapt_embeddings: {path}: no such entries: {', '.join(unknown)}")
    measuring = set()
    for held in MEASURING:
        with open(held, encoding="utf-8") as fh:
            measuring |= {thread_key(q["source"]) for q in yaml.safe_load(fh)["queries"]}
    if any(thread_key(q.get("source", "")) in measuring for q in data):
        sys.exit(f"adapt_embeddings: {path}: holds reports of a measuring set ({', '.join(MEASURING)})")
    return [(q["query"], q["expect"]) for q in data]


def lexical_score_table(kb, texts: list) -> list:
    """[{entry id: lexical score / the text's best}] for each text, as `kb search --lexical` scores it."""
    index = search_index.build_index(kb, dense=False)
    ids = index.header["ids"]
    out = []
    for text in texts:
        scores, _ = search_rank.lexical_scores(index, search_rank.query_terms(search_rank.validate_query(text), index))
        best = max((v[0] for v in scores.values()), default=0.0)
        out.append({ids[i]: v[0] / best for i, v in scores.items()} if best > 0 else {})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="folder with step 2's static-minilm.* files")
    parser.add_argument("--out", default=embed.DATA_DIR)
    parser.add_argument("--kb", default=os.path.join(ROOT, "kb"))
    parser.add_argument("--reports", default=REPORTS)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--stay", type=float, default=3.0, help="weight of the keep-near-the-start penalty")
    parser.add_argument("--holdout", type=float, default=0.0, help="share of reports kept out of the fit")
    parser.add_argument("--real", action="append", default=[], metavar="YAML",
                        help="labelled real reports ({queries: [{query, expect}]}) to fit as well; "
                             "never the evaluation splits")
    parser.add_argument("--real-weight", type=float, default=1.0,
                        help="weight of the real reports' loss against the self-written ones'")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the token dropout")
    parser.add_argument("--tau", type=float, default=TAU, help="temperature of the best-line cosines")
    parser.add_argument("--device", default="cpu",
                        help="torch device of the fit (e.g. cuda, for cross-validation runs; the shipped "
                             "files are fitted on cpu, whose output is reproducible bit for bit)")
    parser.add_argument("--lexical-weight", type=float, default=0.0,
                        help="fit beside the lexical side: each report's entry logits get this times the "
                             "entry's lexical score over the report's best (0: the dense side alone)")
    parser.add_argument("--keep", type=float, default=0.6,
                        help="each epoch, keep each report token with this probability (token dropout)")
    args = parser.parse_args()

    import numpy as np
    import torch

    from kb_tools.core.load import load_kb
    if args.device != "cpu":
        torch.set_default_device(args.device)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # parallel index_add_ sums in a varying order: one thread makes the output reproducible
    base = embed.load(args.base)
    if base is None:
        sys.exit(f"adapt_embeddings: no static-minilm files in {args.base}")
    kb = load_kb(args.kb, use_cache=False)
    entry_ids = list(kb.entries)
    position = {eid: n for n, eid in enumerate(entry_ids)}
    lines, owners = [], []
    for entry in kb.entries.values():
        for text in search_index.dense_texts(entry):  # what the index embeds: the reports must find these
            lines.append(text)
            owners.append(position[entry.id])
    pairs = load_reports(args.reports, set(entry_ids))
    real = [(text, [position[e] for e in expect]) for path in args.real
            for text, expect in load_real(path, set(entry_ids))]
    order = list(range(len(pairs)))
    random.Random(SEED).shuffle(order)
    held = set(order[: int(len(pairs) * args.holdout)])
    print(f"{len(pairs)} reports ({len(held)} held out), {len(real)} real reports, {len(lines)} entry lines",
          file=sys.stderr)

    def tokens(texts):
        ids = [base.token_ids(t) for t in texts]
        flat = torch.tensor([i for t in ids for i in t])
        owner = torch.tensor([n for n, t in enumerate(ids) for _ in t])
        return flat, owner, len(texts)

    width = base.dim
    table = (np.fromfile(base.rows_path, dtype=np.int8).reshape(-1, width).astype(np.float32)
             * np.asarray(base.scales, dtype=np.float32)[:, None])
    start = torch.tensor(table)
    rows = torch.nn.Parameter(start.clone())
    line_tokens, report_tokens = tokens(lines), tokens([t for t, _ in pairs])
    target = torch.tensor([position[eid] for _, eid in pairs])
    # each entry's lines as a padded (entries, most lines) index; padding points at a -inf column
    most = max(owners.count(n) for n in range(len(entry_ids)))
    slots = torch.full((len(entry_ids), most), len(lines), dtype=torch.long)
    for n in range(len(entry_ids)):
        mine = [i for i, o in enumerate(owners) if o == n]
        slots[n, :len(mine)] = torch.tensor(mine)
    if real:
        real_tokens = tokens([t for t, _ in real])
        # a real report may name several acceptable entries: the loss asks for any of them
        real_targets = torch.zeros(len(real), len(entry_ids), dtype=torch.bool)
        for n, (_, expect) in enumerate(real):
            real_targets[n, expect] = True
        used = torch.unique(torch.cat([line_tokens[0], report_tokens[0], real_tokens[0]]))
    else:
        used = torch.unique(torch.cat([line_tokens[0], report_tokens[0]]))
    fit = torch.tensor([i for i in range(len(pairs)) if i not in held])
    kept = torch.tensor(sorted(held), dtype=torch.long)
    start_size = (start[used] ** 2).sum(1).mean()

    def encode(flat, owner, n):
        return torch.nn.functional.normalize(torch.zeros(n, width).index_add_(0, owner, rows[flat]), dim=1)

    def entry_logits(flat, owner, n):
        """reports x entries: each entry's best-line cosine over the temperature."""
        sims = encode(flat, owner, n) @ encode(*line_tokens).T
        sims = torch.cat([sims, torch.full((n, 1), float("-inf"))], dim=1)  # the padding column
        return sims[:, slots].amax(dim=2) / args.tau

    def top3(which):
        if not len(which):
            return float("nan")
        with torch.no_grad():
            logits = entry_logits(*report_tokens) + report_prior
        return (logits[which].topk(3, dim=1).indices == target[which, None]).any(1).float().mean().item()

    def lexical_prior(texts):
        """reports x entries: the lexical side's score of each entry over the report's best, times
        --lexical-weight; the dense side then learns what the lexical side misses."""
        if not args.lexical_weight:
            return 0.0  # adds nothing: the fit stays the dense side's alone, bit for bit
        scores = lexical_score_table(kb, texts)
        return args.lexical_weight * torch.tensor([[row.get(eid, 0.0) for eid in entry_ids] for row in scores])

    report_prior = lexical_prior([t for t, _ in pairs])
    real_prior = lexical_prior([t for t, _ in real]) if real else None

    def dropout(flat, owner):
        """A random subset of the reports' tokens: a report must be found from some of its words,
        not only its rarest one."""
        if args.keep >= 1.0:
            return flat, owner
        chosen = torch.rand(len(flat)) < args.keep
        return flat[chosen], owner[chosen]

    opt = torch.optim.Adam([rows], lr=args.lr)
    for epoch in range(args.epochs + 1):
        if epoch % 25 == 0:
            drift = ((rows[used] - start[used]) ** 2).sum(1).mean() / start_size
            print(f"epoch {epoch}: drift {drift.item():.3f}, top-3 fitted {top3(fit):.3f}, "
                  f"held out {top3(kept):.3f}", file=sys.stderr, flush=True)
        if epoch == args.epochs:
            break
        flat, owner, n = report_tokens
        flat, owner = dropout(flat, owner)
        loss = torch.nn.functional.cross_entropy((entry_logits(flat, owner, n) + report_prior)[fit], target[fit])
        if real:
            flat, owner, n = real_tokens
            flat, owner = dropout(flat, owner)
            logits = entry_logits(flat, owner, n) + real_prior
            wanted = logits.masked_fill(~real_targets, float("-inf")).logsumexp(1)
            loss = loss + args.real_weight * (logits.logsumexp(1) - wanted).mean()
        # built after the loss, as when the shipped files were made: the graph's order sets the order
        # the gradients are summed in, and so the output's bytes
        drift = ((rows[used] - start[used]) ** 2).sum(1).mean() / start_size
        opt.zero_grad()
        (loss + args.stay * drift).backward()
        opt.step()

    write_table(rows.detach().cpu().numpy(), args.base, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
