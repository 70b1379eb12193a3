"""A Trainer class over a model whose last layer is nn.Softmax(dim=0), kept from code that scored
one unbatched example at a time; the trainer feeds torch.log of the output to nn.NLLLoss, so on
batches each class is normalised across the samples instead of each sample across the classes."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build_model(features=12, classes=4):
    return nn.Sequential(nn.Linear(features, 48), nn.ReLU(), nn.Linear(48, classes), nn.Softmax(dim=0))


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.criterion = nn.NLLLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def train_epoch(self, loader):
        self.model.train()
        for x, y in loader:
            probs = self.model(x)
            loss = self.criterion(torch.log(probs + 1e-8), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 12, generator=g)
    y = (x[:, :4] * 2).argmax(1)
    trainer = Trainer(build_model())
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    for epoch in range(4):
        print(f"epoch {epoch} loss {trainer.train_epoch(loader):.3f}")


if __name__ == "__main__":
    main()
