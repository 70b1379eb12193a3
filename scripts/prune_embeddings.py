"""Shrink the static token table (step 5, after scripts/adapt_embeddings.py) so the docs site's
search can fetch it, and write it to kb_tools/embeddings/.

Not run by the tools or the tests: the output is committed. `kb search` and the site read the
same table, so a table small enough for the browser must be the packaged one for both.
Two cuts, each measured before it was shipped (BENCHMARKS.md "Search payload"):

- the vocabulary: only the WordPiece tokens that the texts the table was fitted on use (the KB's
  sentences, the torch docstring sentences of step 2, the self-written and the real training
  reports of steps 3 and 4). A word the kept vocabulary cannot spell is an unknown word, as a
  word outside BERT's vocabulary always was; the lexical side still matches it. No labelled
  query (tests/queries*.yaml, tests/real_reports/) is read, so they still measure the cut;
- the width: the kept rows projected on their first DIMS principal directions, then quantised
  to int8 per row again. Cosines between sentences move a little; the ranking constants were
  checked on the dev split against it.

Needs numpy and torch (step 2's docstring corpus reads the installed torch):

    python scripts/prune_embeddings.py --base <step 4's folder> [--out kb_tools/embeddings] [--dims 128]

Step 4's files are in git history (kb_tools/embeddings/README.md names the commit). It prints
each written file's sha256.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import yaml  # noqa: E402

from kb_tools.search.embedders import static as embed  # noqa: E402
from kb_tools.search.embedders.wordpiece import UNK, basic_words, wordpiece  # noqa: E402

DIMS = 128
FIT_REPORTS = ("scripts/data/synthetic_reports.yaml", "scripts/data/real_reports_train.yaml")


def _strings(node):
    """Every string in a YAML tree (the reports files nest them under a few shapes)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            if key != "report":  # whole reports were added after the fit: the table never read them
                yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def fitted_texts(kb_dir: str) -> list:
    """The texts steps 2-4 fitted the rows on: their tokens are the ones whose rows mean something."""
    import tune_embeddings
    texts = list(tune_embeddings.corpus(kb_dir))
    for name in FIT_REPORTS:
        with open(os.path.join(ROOT, name), encoding="utf-8") as fh:
            texts += list(_strings(yaml.safe_load(fh)))
    return texts


def kept_tokens(tokens: list, texts: list) -> list:
    """Ids of the tokens the texts use (plus [UNK]), in the table's order."""
    vocab = {t: i for i, t in enumerate(tokens)}
    used = {vocab[UNK]} if UNK in vocab else set()
    for text in texts:
        for word in basic_words(text):
            used.update(vocab[p] for p in wordpiece(word, vocab) if p in vocab)
    return sorted(used)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="folder with step 4's three files")
    parser.add_argument("--out", default=embed.DATA_DIR, help="where to write (default: the packaged folder)")
    parser.add_argument("--kb", default=os.path.join(ROOT, "kb"), help="the KB whose sentences are read")
    parser.add_argument("--dims", type=int, default=DIMS, help=f"principal directions kept (default {DIMS})")
    args = parser.parse_args()

    import numpy as np
    from tune_embeddings import write_table

    with open(os.path.join(args.base, embed.TOKENS_FILE), encoding="utf-8") as fh:
        tokens = fh.read().split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    rows = np.fromfile(os.path.join(args.base, embed.ROWS_FILE), dtype=np.int8).reshape(len(tokens), -1)
    scales = np.fromfile(os.path.join(args.base, embed.SCALES_FILE), dtype="<f4")
    vectors = rows.astype(np.float64) * scales[:, None]

    keep = kept_tokens(tokens, fitted_texts(args.kb))
    kept = vectors[keep]
    # principal directions of the kept rows; a sign flip of a direction leaves every cosine as it is
    _, _, directions = np.linalg.svd(kept - kept.mean(axis=0), full_matrices=False)
    projected = kept @ directions[:args.dims].T
    print(f"kept {len(keep)} of {len(tokens)} tokens, {args.dims} of {rows.shape[1]} dimensions")

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, embed.TOKENS_FILE), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(tokens[i] + "\n" for i in keep))
    write_table(projected, args.out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
