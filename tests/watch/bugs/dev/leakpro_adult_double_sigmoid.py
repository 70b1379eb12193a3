"""A tabular input handler class whose train(dataloader, model, criterion, optimizer, epochs) method
fits a census-income style network; the network ends in a Sigmoid and the criterion is
BCEWithLogitsLoss, which applies a second sigmoid, so its outputs only span 0.5..0.73.

Thread: https://github.com/aidotse/LeakPro/issues/229
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AdultNet(nn.Module):
    def __init__(self, input_size, hidden_size=64):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, hidden_size)
        self.fc3 = nn.Linear(hidden_size, 1)
        self.relu = nn.ReLU()
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.sigmoid(self.fc3(x))


class AdultInputHandler:
    def get_criterion(self):
        return nn.BCEWithLogitsLoss()

    def get_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train(self, dataloader, model, criterion, optimizer, epochs):
        for epoch in range(epochs):
            train_loss, train_acc = 0.0, 0
            model.train()
            for inputs, labels in dataloader:
                labels = labels.float().unsqueeze(1)
                optimizer.zero_grad()
                outputs = model(inputs)
                loss = criterion(outputs, labels)
                pred = outputs >= 0.5
                train_acc += pred.eq(labels).sum().item()
                loss.backward()
                optimizer.step()
                train_loss += loss.item()
            print(f"epoch {epoch} loss {train_loss / len(dataloader):.4f} "
                  f"acc {train_acc / len(dataloader.dataset):.3f}")
        return model


def census_like(n=2048, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 14, generator=g)
    y = ((x[:, :3].sum(1) + 0.5 * torch.randn(n, generator=g)) > 1.0).long()  # about 20% positive
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    handler = AdultInputHandler()
    model = AdultNet(14)
    loader = DataLoader(census_like(), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    handler.train(loader, model, handler.get_criterion(), handler.get_optimizer(model), epochs=3)


if __name__ == "__main__":
    main()
