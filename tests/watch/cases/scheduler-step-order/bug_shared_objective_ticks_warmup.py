"""A text classifier (embedding bag + MLP) with a linear warmup schedule. The Trainer keeps one
compute_loss(batch) for training and validation, and the warmup scheduler's step() sits inside
it, after the loss: every validation batch advances the warmup as if it were an update, so each
evaluation skips part of the planned warmup."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, CLASSES = 500, 4


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    tokens = torch.randint(0, VOCAB, (n, 20), generator=g)
    tokens[:, :3] = labels.unsqueeze(1) * 7 + torch.randint(0, 7, (n, 3), generator=g)
    return TensorDataset(tokens, labels)


class BagClassifier(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, dim)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(dim, CLASSES))

    def forward(self, tokens):
        return self.head(self.bag(tokens))


class Trainer:
    def __init__(self, model, warmup=200):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / warmup))

    def compute_loss(self, batch):
        tokens, labels = batch
        loss = F.cross_entropy(self.model(tokens), labels)
        self.scheduler.step()
        return loss

    def train_epoch(self, loader):
        self.model.train()
        for batch in loader:
            loss = self.compute_loss(batch)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate(self, loader):
        self.model.eval()
        with torch.no_grad():
            losses = [self.compute_loss(batch).item() for batch in loader]
        return sum(losses) / len(losses)


def main():
    torch.manual_seed(0)
    train = DataLoader(make_split(1280, 0), batch_size=32, shuffle=True)
    valid = DataLoader(make_split(320, 1), batch_size=32)
    trainer = Trainer(BagClassifier())
    for epoch in range(2):
        trainer.train_epoch(train)
        print(f"epoch {epoch} valid loss {trainer.validate(valid):.3f}")


if __name__ == "__main__":
    main()
