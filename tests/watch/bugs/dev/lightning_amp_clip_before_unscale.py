"""A hand-rolled Lightning-style setup: a LightningModule-like class with training_step and
configure_optimizers, and a small Trainer(precision=16, gradient_clip_val=...) whose optimizer
loop runs the closure (training_step, scaler.scale(loss).backward()), clips the gradients right
after backward, and only then reaches the precision plugin's pre-optimizer step, which calls
scaler.unscale_(optimizer) before scaler.step(). The clipping therefore measures and rescales the
gradients while they are still multiplied by the loss scale (65536), and after unscaling the
optimizer receives a gradient 65536 times below the clip threshold on every step.

Thread: https://github.com/Lightning-AI/pytorch-lightning/issues/9599
"""
import torch
import torch.nn.functional as F
from torch import nn


class NativeMixedPrecisionPlugin:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cpu")

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def pre_optimizer_step(self, optimizer):
        self.scaler.unscale_(optimizer)

    def optimizer_step(self, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()


class Trainer:
    def __init__(self, max_epochs, precision=32, gradient_clip_val=None):
        self.max_epochs, self.gradient_clip_val = max_epochs, gradient_clip_val
        self.precision_plugin = NativeMixedPrecisionPlugin() if precision == 16 else None
        self.global_step = 0

    def clip_gradients(self, model):
        if self.gradient_clip_val:
            return nn.utils.clip_grad_norm_(model.parameters(), self.gradient_clip_val)
        return None

    def run_optimization(self, model, optimizer, batch, batch_idx):
        loss = model.training_step(batch, batch_idx)
        self.precision_plugin.backward(loss)
        grad_norm = self.clip_gradients(model)
        self.precision_plugin.pre_optimizer_step(optimizer)
        self.precision_plugin.optimizer_step(optimizer)
        optimizer.zero_grad()
        return loss, grad_norm

    def fit(self, model, train_dataloader):
        optimizer = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            model.train()
            for batch_idx, batch in enumerate(train_dataloader):
                loss, grad_norm = self.run_optimization(model, optimizer, batch, batch_idx)
                if self.global_step % 20 == 0:
                    print(f"epoch {epoch} step {self.global_step} loss {loss.item():.4f} "
                          f"clipped grad norm (as measured) {grad_norm.item():.3g}")
                self.global_step += 1


class LitCharModel(nn.Module):
    def __init__(self, vocab=32, dim=64, context=8, lr=3e-2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim * context, 128), nn.ReLU(), nn.Linear(128, vocab))
        self.lr = lr

    def forward(self, x):
        return self.mlp(self.emb(x).flatten(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def char_batches(n_batches, batch_size=64, vocab=32, context=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    nxt = torch.randint(0, vocab, (vocab, vocab), generator=torch.Generator().manual_seed(1))
    out = []
    for _ in range(n_batches):
        x = torch.randint(0, vocab, (batch_size, context), generator=g)
        y = nxt[x[:, -1], x[:, -2]]
        out.append((x, y))
    return out


def main():
    torch.manual_seed(0)
    model = LitCharModel()
    trainer = Trainer(max_epochs=3, precision=16, gradient_clip_val=1.0)
    trainer.fit(model, char_batches(40))


if __name__ == "__main__":
    main()
