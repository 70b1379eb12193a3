"""The transfer-learning tutorial's fine-tuning recipe: a small convolutional backbone with a new
two-class linear head, SGD (lr 1e-3, momentum 0.9) and StepLR(step_size=7, gamma=0.1) commented as
"decay LR by a factor of 0.1 every 7 epochs", trained by train_model(model, criterion, optimizer,
scheduler, num_epochs) with a dataloaders dict, a train and a val phase per epoch under
torch.set_grad_enabled, running loss and corrects, and a deep copy of the best weights. The
scheduler is stepped right after optimizer.step() inside the batch loop of the train phase, so the
schedule meant in epochs advances every batch and the learning rate is divided by ten every seven
batches.

Thread: https://github.com/pytorch/tutorials/pull/640
"""
import copy

import torch
from torch import nn, optim
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    proto = torch.randn(2, 3, 24, 24, generator=torch.Generator().manual_seed(5))
    labels = torch.randint(0, 2, (n,), generator=g)
    images = 0.3 * proto[labels] + torch.randn(n, 3, 24, 24, generator=g)
    return TensorDataset(images, labels)


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(16, 1000)

    def forward(self, x):
        return self.fc(self.features(x))


def train_model(model, criterion, optimizer, scheduler, dataloaders, dataset_sizes, num_epochs=25):
    best_model_wts = copy.deepcopy(model.state_dict())
    best_acc = 0.0
    for epoch in range(num_epochs):
        print(f"Epoch {epoch}/{num_epochs - 1}")
        for phase in ["train", "val"]:
            if phase == "train":
                model.train()
            else:
                model.eval()
            running_loss = 0.0
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                        scheduler.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels).item()
            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects / dataset_sizes[phase]
            print(f"{phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}")
            if phase == "val" and epoch_acc > best_acc:
                best_acc = epoch_acc
                best_model_wts = copy.deepcopy(model.state_dict())
    print(f"Best val Acc: {best_acc:.4f}")
    model.load_state_dict(best_model_wts)
    return model


def main():
    torch.manual_seed(0)
    image_datasets = {"train": make_split(244, seed=1), "val": make_split(153, seed=2)}
    dataloaders = {x: DataLoader(image_datasets[x], batch_size=4, shuffle=(x == "train"),
                                 generator=torch.Generator().manual_seed(0))
                   for x in ["train", "val"]}
    dataset_sizes = {x: len(image_datasets[x]) for x in ["train", "val"]}

    model_ft = Backbone()
    model_ft.fc = nn.Linear(model_ft.fc.in_features, 2)
    criterion = nn.CrossEntropyLoss()
    optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.001, momentum=0.9)
    # Decay LR by a factor of 0.1 every 7 epochs
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)
    train_model(model_ft, criterion, optimizer_ft, exp_lr_scheduler, dataloaders, dataset_sizes,
                num_epochs=4)


if __name__ == "__main__":
    main()
