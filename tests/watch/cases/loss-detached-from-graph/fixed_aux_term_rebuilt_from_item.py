"""A multi-task trainer: the auxiliary reconstruction loss is logged as a number and added to the
classification loss as the tensor it is, so both terms train the shared encoder."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 32), nn.ReLU())
        self.classifier = nn.Linear(32, 4)
        self.decoder = nn.Linear(32, 20)

    def forward(self, x):
        h = self.encoder(x)
        return self.classifier(h), self.decoder(h)


class Trainer:
    def __init__(self, model, aux_weight=0.5):
        self.model, self.aux_weight = model, aux_weight
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.history = []

    def step(self, x, y):
        logits, recon = self.model(x)
        cls = F.cross_entropy(logits, y)
        aux = F.mse_loss(recon, x)
        self.history.append(aux.item())
        loss = cls + self.aux_weight * aux
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 20, generator=g)
    y = (x[:, :4] * 3).argmax(1)
    trainer = Trainer(MultiTask())
    for epoch in range(4):
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g):
            loss = trainer.step(xb, yb)
        print(f"epoch {epoch} loss {loss:.3f} aux {trainer.history[-1]:.3f}")


if __name__ == "__main__":
    main()
