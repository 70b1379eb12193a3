"""A DARTS-style architecture search on a custom image-folder dataset: the search script takes
indices = list(range(n_train)), gives the first half to a SubsetRandomSampler for the weights and
the second half to another for the architecture parameters and validation, and alternates weight
and alpha updates in train(train_loader, valid_loader, model, w_optim, alpha_optim, epoch) before
validate(valid_loader, model, epoch). The folder loader stores the samples class by class, so
the unshuffled split puts the first classes in the training half and the last classes in the
validation half: the weights never see the validation classes and validation precision stays at 0.

Thread: https://github.com/khanrc/pt.darts/issues/24
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, SubsetRandomSampler, TensorDataset

OPS = {
    "conv_3x3": lambda C: nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 3, padding=1, bias=False), nn.BatchNorm2d(C, affine=False)),
    "conv_1x1": lambda C: nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 1, bias=False), nn.BatchNorm2d(C, affine=False)),
    "avg_pool_3x3": lambda C: nn.AvgPool2d(3, stride=1, padding=1),
    "skip_connect": lambda C: nn.Identity(),
}


class MixedOp(nn.Module):
    def __init__(self, C):
        super().__init__()
        self._ops = nn.ModuleList([op(C) for op in OPS.values()])

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self._ops))


class SearchCNN(nn.Module):
    def __init__(self, C_in, C, n_classes, n_layers):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(C_in, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
        self.cells = nn.ModuleList([MixedOp(C) for _ in range(n_layers)])
        self.linear = nn.Linear(C, n_classes)
        self.alpha = nn.Parameter(1e-3 * torch.randn(n_layers, len(OPS)))

    def weights(self):
        return [p for n, p in self.named_parameters() if n != "alpha"]

    def alphas(self):
        return [self.alpha]

    def forward(self, x):
        s = self.stem(x)
        for cell, a in zip(self.cells, F.softmax(self.alpha, dim=-1)):
            s = s + cell(s, a)
        return self.linear(F.adaptive_avg_pool2d(s, 1).flatten(1))


def accuracy(logits, y):
    return (logits.argmax(1) == y).float().mean().item()


def train(train_loader, valid_loader, model, w_optim, alpha_optim, epoch):
    model.train()
    for step, ((trn_X, trn_y), (val_X, val_y)) in enumerate(zip(train_loader, valid_loader)):
        alpha_optim.zero_grad()
        F.cross_entropy(model(val_X), val_y).backward()   # first-order architecture step
        alpha_optim.step()
        w_optim.zero_grad()
        logits = model(trn_X)
        loss = F.cross_entropy(logits, trn_y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.weights(), 5.0)
        w_optim.step()
        if step % 10 == 0:
            print(f"Train: [{epoch}][{step}] Loss {loss.item():.3f} Prec@1 {accuracy(logits, trn_y):.3f}")


def validate(valid_loader, model, epoch):
    model.eval()
    hits = total = 0
    with torch.no_grad():
        for X, y in valid_loader:
            hits += (model(X).argmax(1) == y).sum().item()
            total += y.numel()
    print(f"Valid: [{epoch}] Final Prec@1 {hits / total:.3f}")
    return hits / total


def image_folder(n_per_class=120, n_classes=6, seed=0):
    """Read like an ImageFolder: class 0's files first, then class 1's, and so on."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(n_classes, 3, 12, 12, generator=torch.Generator().manual_seed(3))
    xs, ys = [], []
    for c in range(n_classes):
        xs.append(protos[c] + 0.9 * torch.randn(n_per_class, 3, 12, 12, generator=g))
        ys.append(torch.full((n_per_class,), c))
    return TensorDataset(torch.cat(xs), torch.cat(ys))


def main():
    torch.manual_seed(0)
    train_data = image_folder()
    n_train = len(train_data)
    split = n_train // 2
    indices = list(range(n_train))
    train_loader = DataLoader(train_data, batch_size=24,
                              sampler=SubsetRandomSampler(indices[:split], generator=torch.Generator().manual_seed(0)))
    valid_loader = DataLoader(train_data, batch_size=24,
                              sampler=SubsetRandomSampler(indices[split:], generator=torch.Generator().manual_seed(1)))
    model = SearchCNN(3, 16, n_classes=6, n_layers=3)
    w_optim = torch.optim.SGD(model.weights(), lr=0.025, momentum=0.9, weight_decay=3e-4)
    alpha_optim = torch.optim.Adam(model.alphas(), lr=3e-4, betas=(0.5, 0.999), weight_decay=1e-3)
    for epoch in range(4):
        train(train_loader, valid_loader, model, w_optim, alpha_optim, epoch)
        validate(valid_loader, model, epoch)


if __name__ == "__main__":
    main()
