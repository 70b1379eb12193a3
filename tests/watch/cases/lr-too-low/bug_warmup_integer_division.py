"""A Hugging Face-like trainer whose create_scheduler() method builds a linear warmup as a
LambdaLR with min(1, step // warmup_steps): integer division makes the factor 0 for the whole
warmup of 200 steps, so the learning rate is exactly 0 and nothing is learned while it lasts."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, train_dataset, lr=1e-3, warmup_steps=200, batch_size=32):
        self.model = model
        self.loader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        self.scheduler = self.create_scheduler(warmup_steps)

    def create_scheduler(self, warmup_steps):
        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: min(1, step // warmup_steps))

    def compute_loss(self, model, inputs):
        return nn.functional.cross_entropy(model(inputs["x"]), inputs["labels"])

    def train(self, epochs):
        for epoch in range(epochs):
            for x, labels in self.loader:
                loss = self.compute_loss(self.model, {"x": x, "labels": labels})
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    labels = (x[:, :4] @ torch.randn(4, 4, generator=g)).argmax(1)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 4))
    print(f"loss {Trainer(model, TensorDataset(x, labels)).train(epochs=4):.3f}")


if __name__ == "__main__":
    main()
