"""AllenNLP-style GradientDescentTrainer with use_amp=True and grad_clipping set.

Shape of the user's code: a `BasicClassifier`-like model whose forward returns an
output dict with "loss"; a `GradientDescentTrainer` whose `_try_train()` first calls
`enable_gradient_clipping(model, grad_clipping)` (a tensor hook per parameter that
clamps its gradient to [-clip, clip] during backward) and then runs `_train_epoch()`:
zero_grad, forward under autocast, `scaler.scale(loss).backward()`,
`rescale_gradients()` (unscales only when `grad_norm` is set), `scaler.step`,
`scaler.update`. Bug: the clamp hooks fire during backward on gradients that are
still multiplied by the loss scale (65536), so almost every entry is clamped to
+-clip and then divided by 65536 in `scaler.step`: each gradient becomes at most
clip/65536 and training with SGD barely moves.
Thread: https://github.com/allenai/allennlp/issues/5413
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ, NUM_LABELS, EMB = 200, 24, 4, 32


def clamp_tensor(tensor, minimum, maximum):
    return tensor.clamp(minimum, maximum)


def enable_gradient_clipping(model, grad_clipping):
    if grad_clipping is not None:
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.register_hook(
                    lambda grad: clamp_tensor(grad, minimum=-grad_clipping, maximum=grad_clipping)
                )


class BagOfEmbeddingsClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedder = nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.feedforward = nn.Sequential(nn.Linear(EMB, EMB), nn.ReLU())
        self.classification_layer = nn.Linear(EMB, NUM_LABELS)
        self.correct, self.total = 0, 0

    def forward(self, tokens, label=None):
        mask = (tokens != 0).float().unsqueeze(-1)
        embedded = self.embedder(tokens)
        encoded = (embedded * mask).sum(1) / mask.sum(1).clamp(min=1)
        logits = self.classification_layer(self.feedforward(encoded))
        output = {"logits": logits}
        if label is not None:
            output["loss"] = F.cross_entropy(logits.float(), label)
            self.correct += (logits.argmax(-1) == label).sum().item()
            self.total += label.numel()
        return output

    def get_metrics(self, reset=False):
        acc = self.correct / max(1, self.total)
        if reset:
            self.correct, self.total = 0, 0
        return {"accuracy": acc}


class GradientDescentTrainer:
    def __init__(self, model, optimizer, data_loader, validation_data_loader, num_epochs,
                 grad_norm=False, grad_clipping=None, use_amp=False):
        self.model = model
        self.optimizer = optimizer
        self.data_loader = data_loader
        self._validation_data_loader = validation_data_loader
        self._num_epochs = num_epochs
        self._grad_norm = grad_norm
        self._grad_clipping = grad_clipping
        self._use_amp = use_amp
        self._scaler = torch.amp.GradScaler("cpu") if use_amp else None

    def rescale_gradients(self):
        if not isinstance(self._grad_norm, bool):
            if self._scaler is not None:
                self._scaler.unscale_(self.optimizer)
            return torch.nn.utils.clip_grad_norm_(self.model.parameters(), self._grad_norm).item()
        return None

    def _train_epoch(self, epoch):
        self.model.train()
        train_loss, batches = 0.0, 0
        for tokens, label in self.data_loader:
            self.optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self._use_amp):
                output = self.model(tokens, label)
                loss = output["loss"]
            if self._scaler is not None:
                self._scaler.scale(loss).backward()
            else:
                loss.backward()
            train_loss += loss.item()
            batches += 1
            self.rescale_gradients()
            if self._scaler is not None:
                self._scaler.step(self.optimizer)
                self._scaler.update()
            else:
                self.optimizer.step()
        metrics = self.model.get_metrics(reset=True)
        metrics["loss"] = train_loss / batches
        return metrics

    @torch.no_grad()
    def _validation_loss(self):
        self.model.eval()
        val_loss, batches = 0.0, 0
        for tokens, label in self._validation_data_loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self._use_amp):
                val_loss += self.model(tokens, label)["loss"].item()
            batches += 1
        metrics = self.model.get_metrics(reset=True)
        metrics["loss"] = val_loss / batches
        return metrics

    def _try_train(self):
        enable_gradient_clipping(self.model, self._grad_clipping)
        metrics = {}
        for epoch in range(self._num_epochs):
            train_metrics = self._train_epoch(epoch)
            val_metrics = self._validation_loss()
            print(f"epoch {epoch} training_loss {train_metrics['loss']:.4f} "
                  f"training_accuracy {train_metrics['accuracy']:.3f} "
                  f"validation_loss {val_metrics['loss']:.4f} "
                  f"validation_accuracy {val_metrics['accuracy']:.3f}")
            metrics = {"training_" + k: v for k, v in train_metrics.items()}
            metrics.update({"validation_" + k: v for k, v in val_metrics.items()})
        return metrics

    def train(self):
        return self._try_train()


def make_split(gen, n):
    label = torch.randint(0, NUM_LABELS, (n,), generator=gen)
    tokens = torch.randint(1, VOCAB, (n, SEQ), generator=gen)
    # a few class-indicative tokens are sprinkled into every sentence
    cue = 1 + label * 10 + torch.randint(0, 10, (n, 4), generator=gen).T
    pos = torch.randint(0, SEQ, (n, 4), generator=gen)
    tokens.scatter_(1, pos, cue.T)
    lengths = torch.randint(SEQ // 2, SEQ + 1, (n,), generator=gen)
    tokens[torch.arange(SEQ)[None, :] >= lengths[:, None]] = 0
    tokens[:, 0] = tokens[:, 0].clamp(min=1)
    return TensorDataset(tokens, label)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_data, val_data = make_split(gen, 3200), make_split(gen, 800)
    train_loader = DataLoader(train_data, batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(val_data, batch_size=200)

    model = BagOfEmbeddingsClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = GradientDescentTrainer(model, optimizer, train_loader, val_loader, num_epochs=4,
                                     grad_clipping=5.0, use_amp=True)
    metrics = trainer.train()
    print(f"final validation_accuracy {metrics['validation_accuracy']:.3f} "
          f"validation_loss {metrics['validation_loss']:.4f} "
          f"loss scale {trainer._scaler.get_scale():.0f}")


if __name__ == "__main__":
    main()
