"""An active learning loop for a BERT-style text classifier: each round reloads the pretrained
checkpoint (from_pretrained returns the model in eval mode), patch_module swaps its nn.Dropout
layers for always-on MC dropout, a small trainer fine-tunes it, BALD over 10 MC passes picks the
next texts to label, and unpatch_module swaps plain nn.Dropout back in before the round's test
accuracy is measured. The replacement layers are created in their default training mode while
the model around them is in eval mode (model.training is False), so the "deterministic"
evaluation still drops units and the reported test accuracy is noisy and too low.

Thread: https://github.com/baal-org/baal/issues/246
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
V, L, C = 200, 12, 3


class MCDropout(nn.Dropout):
    def forward(self, x):
        return F.dropout(x, self.p, True, self.inplace)


def _replace(module, fn):
    for name, child in module.named_children():
        new = fn(child)
        if new is not None:
            module.add_module(name, new)
        _replace(child, fn)
    return module


def patch_module(module, inplace=True):
    module = module if inplace else copy.deepcopy(module)
    return _replace(module, lambda m: MCDropout(m.p) if type(m) is nn.Dropout else None)


def unpatch_module(module, inplace=True):
    module = module if inplace else copy.deepcopy(module)
    return _replace(module, lambda m: nn.Dropout(m.p) if isinstance(m, MCDropout) else None)


class TinyBertForSequenceClassification(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.EmbeddingBag(V, 64)
        self.pooler = nn.Sequential(nn.Linear(64, 64), nn.Tanh())
        self.dropout = nn.Dropout(0.5)
        self.classifier = nn.Linear(64, C)

    def forward(self, input_ids):
        return self.classifier(self.dropout(self.pooler(self.embeddings(input_ids))))


PRETRAINED = TinyBertForSequenceClassification().state_dict()


def from_pretrained():
    model = TinyBertForSequenceClassification()
    model.load_state_dict(PRETRAINED)
    return model.eval()


def make_texts(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, C, (n,), generator=g)
    ids = torch.randint(0, V, (n, L), generator=g)
    keyword = (y * 20 + torch.randint(0, 20, (n,), generator=g)).unsqueeze(1)
    ids[:, :3] = torch.where(torch.rand(n, 3, generator=g) < 0.6, keyword, ids[:, :3])
    return ids, y


def main():
    pool_x, pool_y = make_texts(2000, 0)
    test_x, test_y = make_texts(600, 1)
    labelled = torch.zeros(2000, dtype=torch.bool)
    labelled[torch.randperm(2000, generator=torch.Generator().manual_seed(2))[:64]] = True
    for rnd in range(6):
        model = patch_module(from_pretrained(), inplace=False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
        x, y = pool_x[labelled], pool_y[labelled]
        model.train()
        for epoch in range(3):
            for idx in torch.randperm(len(y)).split(16):
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x[idx]), y[idx])
                loss.backward()
                optimizer.step()
        model.eval()
        unl = (~labelled).nonzero().squeeze(1)
        with torch.no_grad():
            probs = torch.stack([F.softmax(model(pool_x[unl]), -1) for _ in range(10)])
        mean = probs.mean(0)
        bald = -(mean * mean.log()).sum(-1) + (probs * probs.log()).sum(-1).mean(0)
        labelled[unl[bald.topk(32).indices]] = True
        model = unpatch_module(model, inplace=False)
        with torch.no_grad():
            acc = (model(test_x).argmax(-1) == test_y).float().mean().item()
        print(f"round {rnd} labelled {len(y)} train loss {loss.item():.3f} test acc {acc:.3f}")


if __name__ == "__main__":
    main()
