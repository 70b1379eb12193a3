"""A prune-then-finetune script: the optimizer is built for the dense model, the pruner masks
neurons, and a speedup step replaces each masked Linear with a smaller new one (copying the kept
weights); the finetuning trainer(model, optimizer, criterion) keeps using the old optimizer,
which holds only the replaced layers' tensors, so the new layers never move.

Thread: https://github.com/microsoft/nni/issues/4521
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def l1_norm_masks(model, sparsity=0.5):
    masks = {}
    for name in ("fc1", "fc2"):
        w = getattr(model, name).weight.detach()
        keep = w.abs().sum(1).argsort(descending=True)[: int(w.shape[0] * (1 - sparsity))]
        masks[name] = keep.sort().values
    return masks


def speedup_model(model, masks):
    keep1, keep2 = masks["fc1"], masks["fc2"]
    new1, new2, new3 = nn.Linear(32, len(keep1)), nn.Linear(len(keep1), len(keep2)), nn.Linear(len(keep2), 10)
    with torch.no_grad():
        new1.weight.copy_(model.fc1.weight[keep1])
        new1.bias.copy_(model.fc1.bias[keep1])
        new2.weight.copy_(model.fc2.weight[keep2][:, keep1])
        new2.bias.copy_(model.fc2.bias[keep2])
        new3.weight.copy_(model.fc3.weight[:, keep2])
        new3.bias.copy_(model.fc3.bias)
    model.fc1, model.fc2, model.fc3 = new1, new2, new3
    return model


def trainer(model, optimizer, criterion, loader, epochs=1):
    model.train()
    for epoch in range(epochs):
        for data, target in loader:
            optimizer.zero_grad()
            loss = criterion(model(data), target)
            loss.backward()
            optimizer.step()
        print(f"finetune epoch {epoch} loss {loss.item():.4f}")


def main():
    g = torch.Generator().manual_seed(0)
    protos = torch.randn(10, 32, generator=g)
    y = torch.randint(0, 10, (2048,), generator=g)
    loader = DataLoader(TensorDataset(protos[y] + 1.0 * torch.randn(2048, 32, generator=g), y),
                        batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    masks = l1_norm_masks(model)
    speedup_model(model, masks)
    trainer(model, optimizer, criterion, loader, epochs=3)


if __name__ == "__main__":
    main()
