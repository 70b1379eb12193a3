"""A fine-tuning recipe with a train and a val phase per epoch over a dataloaders dict, under
torch.set_grad_enabled(phase == "train"). StepLR(step_size=7, gamma=0.1) is meant in epochs, and
scheduler.step() runs once per epoch, after the train phase."""
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_model(model, criterion, optimizer, scheduler, dataloaders, num_epochs):
    best_acc, best_weights = 0.0, copy.deepcopy(model.state_dict())
    for epoch in range(num_epochs):
        for phase in ("train", "val"):
            model.train() if phase == "train" else model.eval()
            corrects, seen = 0, 0
            for inputs, labels in dataloaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                corrects += (outputs.argmax(1) == labels).sum().item()
                seen += len(labels)
            if phase == "train":
                scheduler.step()
            if phase == "val" and corrects / seen > best_acc:
                best_acc, best_weights = corrects / seen, copy.deepcopy(model.state_dict())
        print(f"epoch {epoch} val acc {corrects / seen:.3f} lr {optimizer.param_groups[0]['lr']:.1e}")
    model.load_state_dict(best_weights)
    return model


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return TensorDataset(x, (x[:, :4].sum(1) > 0).long())


def main():
    torch.manual_seed(0)
    dataloaders = {"train": DataLoader(make_split(512, 1), batch_size=16, shuffle=True,
                                       generator=torch.Generator().manual_seed(0)),
                   "val": DataLoader(make_split(128, 2), batch_size=32)}
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
    train_model(model, nn.CrossEntropyLoss(), optimizer, scheduler, dataloaders, num_epochs=3)


if __name__ == "__main__":
    main()
