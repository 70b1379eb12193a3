"""The fixed twin: validate() takes the input gradient with torch.autograd.grad(loss, x), which
returns it without writing into any parameter's .grad, so the training steps apply only their own
gradients."""
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, features, tags):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(64, tags)

    def forward(self, x):
        return self.head(self.body(x))


class Trainer:
    def __init__(self, model, lr=0.05, accumulate=2):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.accumulate = accumulate

    def train_step(self, micro_batches):
        self.model.train()
        for x, y in micro_batches:
            loss = nn.functional.binary_cross_entropy_with_logits(self.model(x), y) / self.accumulate
            loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.item() * self.accumulate

    def validate(self, x, y):
        self.model.eval()
        x = x.clone().requires_grad_(True)
        loss = nn.functional.binary_cross_entropy_with_logits(self.model(x), y)
        (grad_x,) = torch.autograd.grad(loss, x)
        saliency = grad_x.abs().mean(0)   # mean |d loss / d feature| over the validation set
        self.model.train()
        return loss.item(), saliency


def make_data(n, w, g):
    x = torch.randn(n, 20, generator=g)
    y = (x @ w + 0.5 * torch.randn(n, 6, generator=g) > 0.5).float()
    return x, y


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 6, generator=g) * (torch.rand(20, 1, generator=g) < 0.4)   # 8 or so features matter
    train_x, train_y = make_data(2048, w, g)
    val_x, val_y = make_data(256, w, g)
    trainer = Trainer(Tagger(20, 6))
    for step in range(60):
        idx = torch.randint(0, 2048, (2, 32), generator=g)
        trainer.train_step([(train_x[i], train_y[i]) for i in idx])
        if step % 10 == 9:
            val_loss, saliency = trainer.validate(val_x, val_y)
    top = saliency.topk(3).indices.tolist()
    print(f"validation loss {val_loss:.3f}, most salient features {top}")


if __name__ == "__main__":
    main()
