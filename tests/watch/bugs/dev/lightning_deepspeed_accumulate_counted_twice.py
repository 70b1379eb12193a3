"""Lightning-style Trainer(accumulate_grad_batches=8) driving a DeepSpeed-style engine.

Shape of the user's code: a LightningModule with `training_step` (returns the batch
loss) and `configure_optimizers`; a Trainer with `accumulate_grad_batches=8` and the
DeepSpeed plugin, which copies that value into the engine's
`gradient_accumulation_steps`. The trainer loop divides the step loss by
`accumulate_grad_batches`, calls `engine.backward(loss)` every batch and
`engine.step()` every 8th batch. Stand-in classes below keep that call shape.
Bug: accumulation is done twice. The engine divides the loss by its own
gradient_accumulation_steps again and counts its own micro-steps, so it only runs
the optimizer when it has been stepped 8 times, i.e. every 64 batches: the model
gets 8x fewer parameter updates than configured and learns far more slowly, with
nothing reported as wrong.
Thread: https://github.com/Lightning-AI/pytorch-lightning/issues/6170
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MiniDeepSpeedEngine:
    """Stand-in for deepspeed.DeepSpeedEngine: scales the loss by the accumulation
    steps in backward() and only steps the optimizer on accumulation boundaries."""

    def __init__(self, model, optimizer, gradient_accumulation_steps):
        self.module = model
        self.optimizer = optimizer
        self._gas = gradient_accumulation_steps
        self.micro_steps = 0
        self.global_steps = 0

    def gradient_accumulation_steps(self):
        return self._gas

    def is_gradient_accumulation_boundary(self):
        return (self.micro_steps + 1) % self.gradient_accumulation_steps() == 0

    def backward(self, loss):
        if self.gradient_accumulation_steps() > 1:
            loss = loss / self.gradient_accumulation_steps()
        loss.backward()

    def step(self):
        if self.is_gradient_accumulation_boundary():
            self.optimizer.step()
            self.optimizer.zero_grad()
            self.global_steps += 1
        self.micro_steps += 1


class DeepSpeedPlugin:
    def setup(self, module, optimizer, trainer):
        # the plugin forces the engine's accumulation to the trainer's value
        return MiniDeepSpeedEngine(module, optimizer, trainer.accumulate_grad_batches)


class MiniTrainer:
    def __init__(self, max_epochs, accumulate_grad_batches=1, plugins=None):
        self.max_epochs = max_epochs
        self.accumulate_grad_batches = accumulate_grad_batches
        self.plugin = plugins

    def fit(self, module, train_dataloader, val_dataloader):
        optimizer = module.configure_optimizers()
        engine = self.plugin.setup(module, optimizer, self)
        for epoch in range(self.max_epochs):
            module.train()
            for batch_idx, batch in enumerate(train_dataloader):
                loss = module.training_step(batch, batch_idx)
                # trainer-side accumulation: normalise the closure loss ...
                loss = loss / self.accumulate_grad_batches
                engine.backward(loss)
                # ... and only step the optimizer every accumulate_grad_batches batches
                if (batch_idx + 1) % self.accumulate_grad_batches == 0:
                    engine.step()
            val = module.validation_epoch(val_dataloader)
            print(f"epoch {epoch} val_loss {val['val_loss']:.4f} val_acc {val['val_acc']:.3f} "
                  f"optimizer updates so far {engine.global_steps}")
        return val


class LitClassifier(nn.Module):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                 nn.Linear(64, 5))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)

    @torch.no_grad()
    def validation_epoch(self, loader):
        self.eval()
        losses, correct, total = [], 0, 0
        for x, y in loader:
            logits = self(x)
            losses.append(F.cross_entropy(logits, y).item())
            correct += (logits.argmax(-1) == y).sum().item()
            total += y.numel()
        return {"val_loss": sum(losses) / len(losses), "val_acc": correct / total}


def make_data(gen, w, n):
    x = torch.randn(n, 20, generator=gen)
    y = (torch.tanh(x @ w[0]) @ w[1]).argmax(-1)
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(20, 32, generator=gen), torch.randn(32, 5, generator=gen))
    train_loader = DataLoader(make_data(gen, w, 4096), batch_size=8, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(make_data(gen, w, 1024), batch_size=256)

    model = LitClassifier(lr=1e-3)
    trainer = MiniTrainer(max_epochs=3, accumulate_grad_batches=8, plugins=DeepSpeedPlugin())
    val = trainer.fit(model, train_loader, val_loader)
    print(f"final val_loss {val['val_loss']:.4f} val_acc {val['val_acc']:.3f}")


if __name__ == "__main__":
    main()
