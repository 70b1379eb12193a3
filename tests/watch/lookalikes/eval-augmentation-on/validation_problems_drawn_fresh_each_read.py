"""A regression toy trained on problems generated on the fly: every read of the dataset draws a new
random sequence and its target (the sequence's running mean at the end), for training and for
validation alike. Nothing is augmented: there is no fixed item to alter, each read is a new
problem, and the validation loss estimates the expected loss over the task."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

LENGTH = 320


class RandomProblems(Dataset):
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        x = torch.randn(LENGTH)
        scale = torch.rand(())
        return x * scale, (x * scale).mean(0, keepdim=True) * 10


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(LENGTH, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_loader = DataLoader(RandomProblems(1280), batch_size=64)
    val_loader = DataLoader(RandomProblems(320), batch_size=64)
    for epoch in range(3):
        model.train()
        for x, y in train_loader:
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = sum(F.mse_loss(model(x), y).item() for x, y in val_loader) / len(val_loader)
        print(f"epoch {epoch}: validation mse {val:.4f}")


if __name__ == "__main__":
    main()
