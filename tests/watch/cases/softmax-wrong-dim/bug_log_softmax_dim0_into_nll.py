"""A classifier whose forward ends in F.log_softmax(x, dim=0), written for a single unbatched
vector and then trained on batches with nll_loss: each class is normalised across the batch,
so the predicted distribution of a sample depends on the other samples in its batch."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(20, 64), nn.Linear(64, 6)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=0)


def train(model, loader, optimizer, epochs=3):
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 20, generator=g)
    y = (x[:, :6] @ torch.randn(6, 6, generator=g)).argmax(1)
    model = Net()
    train(model, DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g),
          torch.optim.Adam(model.parameters(), lr=1e-3))


if __name__ == "__main__":
    main()
