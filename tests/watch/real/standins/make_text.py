"""Writes the synthetic word corpus in standins/data/wikitext-2 (train/valid/test.txt) that
stands in for WikiText-2: lines of words drawn from a small Zipf-like vocabulary with a fixed
seed. Run it again to rebuild the committed files byte for byte."""
import os
import random

SIZES = {"train.txt": 400, "valid.txt": 60, "test.txt": 60}  # lines


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wikitext-2")
    os.makedirs(here, exist_ok=True)
    vocab = [f"w{i}" for i in range(500)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    for k, (name, n) in enumerate(SIZES.items()):
        rng = random.Random(k)
        with open(os.path.join(here, name), "w") as f:
            for _ in range(n):
                words = rng.choices(vocab, weights, k=rng.randint(5, 25))
                f.write(" " + " ".join(words) + " \n")


if __name__ == "__main__":
    main()
