"""A clean loop that saves the whole model with torch.save(model), loads it back with
weights_only=True and the model's classes as safe globals (as word_language_model/main.py
does), and copies it with copy.deepcopy: all must work under kb watch exactly as without it,
and the saved file must not refer to kb_tools."""
import copy
import io
import zipfile

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    torch.manual_seed(0)
    model = Net()
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
    assert b"kb_tools" not in pkl and b"audit" not in pkl, "the saved model carries a hook of kb watch"
    buf.seek(0)
    with torch.serialization.safe_globals([Net, nn.Linear]):
        loaded = torch.load(buf)
    clone = copy.deepcopy(model)
    assert not loaded._forward_pre_hooks and not clone._forward_pre_hooks
    assert torch.equal(loaded(x), model(x)) and torch.equal(clone(x), model(x))
    print("saved, loaded and copied")


if __name__ == "__main__":
    main()
