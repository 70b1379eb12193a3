"""A recipe-driven training setup: a manager holds modifiers and wraps the optimizer in a
ScheduledOptimizer whose step() first lets every modifier update the module and then steps the
real optimizer; its zero_grad() keeps the gradient buffers allocated (zero-filled). A
TrainableParamsModifier meant to freeze the embedding from epoch 0 sets requires_grad=False in its
first update, which runs inside the first step(), after backward has already given those
parameters a .grad. The optimizer still holds them with zero-filled gradients, so AdamW keeps
applying its momentum and weight decay and the "frozen" embedding keeps moving.

Thread: https://github.com/neuralmagic/sparseml/issues/965
"""
import torch
import torch.nn.functional as F
from torch import nn


class TrainableParamsModifier:
    def __init__(self, params, trainable, start_epoch=0.0):
        self.params, self.trainable, self.start_epoch = params, trainable, start_epoch
        self._applied = False

    def update(self, module, optimizer, epoch, steps_per_epoch):
        if self._applied or epoch < self.start_epoch:
            return
        for name, param in module.named_parameters():
            if any(name.startswith(p) for p in self.params):
                param.requires_grad = self.trainable
        self._applied = True


class ScheduledModifierManager:
    def __init__(self, modifiers):
        self.modifiers = modifiers

    def modify(self, module, optimizer, steps_per_epoch):
        return ScheduledOptimizer(optimizer, module, self, steps_per_epoch)


class ScheduledOptimizer:
    def __init__(self, optimizer, module, manager, steps_per_epoch):
        self._optimizer, self._module, self._manager = optimizer, module, manager
        self._steps_per_epoch, self._step = steps_per_epoch, 0

    @property
    def param_groups(self):
        return self._optimizer.param_groups

    def zero_grad(self):
        self._optimizer.zero_grad(set_to_none=False)

    def step(self):
        epoch = self._step / self._steps_per_epoch
        for modifier in self._manager.modifiers:
            modifier.update(self._module, self._optimizer, epoch, self._steps_per_epoch)
        self._optimizer.step()
        self._step += 1


class TextClassifier(nn.Module):
    def __init__(self, vocab=500, dim=48, num_labels=4):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim), nn.GELU())
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids):
        return self.classifier(self.encoder(self.embeddings(input_ids).mean(dim=1)))


def topic_batches(n_batches, batch_size=32, seq_len=20, vocab=500, num_labels=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        labels = torch.randint(0, num_labels, (batch_size,), generator=g)
        ids = torch.randint(0, vocab, (batch_size, seq_len), generator=g)
        topical = torch.rand(batch_size, seq_len, generator=g) < 0.3
        ids = torch.where(topical, labels[:, None] * 25 + torch.randint(0, 25, (batch_size, seq_len), generator=g), ids)
        out.append((ids, labels))
    return out


def main():
    torch.manual_seed(0)
    model = TextClassifier()
    train_batches = topic_batches(30)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    manager = ScheduledModifierManager([TrainableParamsModifier(["embeddings"], trainable=False, start_epoch=0.0)])
    optimizer = manager.modify(model, optimizer, steps_per_epoch=len(train_batches))
    frozen_before = model.embeddings.weight.detach().clone()
    for epoch in range(3):
        model.train()
        for step, (ids, labels) in enumerate(train_batches):
            loss = F.cross_entropy(model(ids), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 15 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        drift = (model.embeddings.weight - frozen_before).abs().max().item()
        print(f"epoch {epoch}: embeddings.requires_grad={model.embeddings.weight.requires_grad}, "
              f"max change since the freeze {drift:.3e}")


if __name__ == "__main__":
    main()
