"""A clean loop that saves the whole model with torch.save(model) and copies it with
copy.deepcopy, as word_language_model/main.py and many tutorials do: both must work under
kb watch exactly as without it, and the saved file must not refer to kb_tools."""
import copy
import io
import zipfile

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    for _ in range(12):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    buf = io.BytesIO()
    torch.save(model, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        pkl = next(z.read(n) for n in z.namelist() if n.endswith("data.pkl"))
    assert b"kb_tools" not in pkl, "the saved model refers to kb_tools"
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    clone = copy.deepcopy(model)
    assert torch.equal(loaded(x), model(x)) and torch.equal(clone(x), model(x))
    print("saved, loaded and copied")


if __name__ == "__main__":
    main()
