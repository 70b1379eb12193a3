"""A sentence-pair classifier configured by an options dict: __init__ builds the hidden stack in a
loop and keeps each [Linear, activation] pair in a plain Python list (self.hids), the activation
chosen by name from nn; only the input projection and the classifier are registered. The list's
layers are invisible to net.parameters(), so Adam never updates them and they keep their random
initial weights while the loss falls only as far as the two registered layers allow.

Thread: https://github.com/pytorch/pytorch/issues/715
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SNLINet(nn.Module):
    def __init__(self, options):
        super().__init__()
        self.inp = nn.Linear(4 * options["n_emb"], options["n_hid"])
        self.hids = []
        for _li in range(options["n_layers"]):
            self.hids.append([
                nn.Linear(options["n_hid"], options["n_hid"]),
                getattr(nn, options["act"])(),
            ])
        self.classifier = nn.Linear(options["n_hid"], 3)

    def forward(self, premise, hypothesis):
        pair = torch.cat([premise, hypothesis, premise * hypothesis, (premise - hypothesis).abs()], dim=1)
        h = torch.relu(self.inp(pair))
        for linear, act in self.hids:
            h = act(linear(h))
        return self.classifier(h)


def snli_like(n, n_emb, seed):
    g = torch.Generator().manual_seed(seed)
    premise = torch.randn(n, n_emb, generator=g)
    label = torch.randint(0, 3, (n,), generator=g)
    noise = torch.randn(n, n_emb, generator=g)
    hypothesis = torch.where((label == 0)[:, None], premise + 0.3 * noise,      # entailment
                 torch.where((label == 1)[:, None], -premise + 0.3 * noise,     # contradiction
                             noise))                                            # neutral
    return TensorDataset(premise, hypothesis, label)


def evaluate(net, loader):
    net.eval()
    correct = total = 0
    with torch.no_grad():
        for p, h, y in loader:
            correct += (net(p, h).argmax(1) == y).sum().item()
            total += y.numel()
    return correct / total


def main():
    torch.manual_seed(0)
    options = {"n_emb": 24, "n_hid": 64, "n_layers": 3, "act": "Tanh"}
    net = SNLINet(options)
    train_loader = DataLoader(snli_like(4000, options["n_emb"], 0), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    dev_loader = DataLoader(snli_like(1000, options["n_emb"], 1), batch_size=500)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    print(f"parameter tensors given to the optimizer: {len(list(net.parameters()))}")
    first_hidden = net.hids[0][0].weight.detach().clone()
    for epoch in range(2):
        net.train()
        for step, (p, h, y) in enumerate(train_loader):
            optimizer.zero_grad()
            loss = criterion(net(p, h), y)
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        moved = (net.hids[0][0].weight - first_hidden).abs().max().item()
        print(f"epoch {epoch} dev acc {evaluate(net, dev_loader):.3f} first hidden layer change {moved:.2e}")


if __name__ == "__main__":
    main()
