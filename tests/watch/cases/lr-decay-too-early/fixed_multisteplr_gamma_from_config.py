"""A classifier trained by a Trainer class that reads its schedule from a config dict. The config
switches the decay off by setting lr_decay to 0, and the Trainer builds the scheduler with
gamma=1 in that case (no decay), MultiStepLR(milestones, gamma=lr_decay) otherwise."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"lr": 0.05, "epochs": 8, "milestones": [3, 6], "lr_decay": 0.0, "batch_size": 32}


class Trainer:
    def __init__(self, model, config):
        self.model, self.config = model, config
        self.optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
        self.scheduler = self.build_scheduler()
        self.criterion = nn.CrossEntropyLoss()

    def build_scheduler(self):
        gamma = self.config["lr_decay"] or 1.0  # 0 means "no decay", not "multiply by 0"
        return torch.optim.lr_scheduler.MultiStepLR(self.optimizer, self.config["milestones"], gamma=gamma)

    def train_epoch(self, loader):
        self.model.train()
        for x, y in loader:
            loss = self.criterion(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def fit(self, loader):
        for epoch in range(self.config["epochs"]):
            loss = self.train_epoch(loader)
            self.scheduler.step()
            print(f"epoch {epoch} loss {loss:.3f} lr {self.optimizer.param_groups[0]['lr']:.3g}")


def make_data(n=320, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    loader = DataLoader(make_data(), batch_size=CONFIG["batch_size"], shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    Trainer(model, CONFIG).fit(loader)


if __name__ == "__main__":
    main()
