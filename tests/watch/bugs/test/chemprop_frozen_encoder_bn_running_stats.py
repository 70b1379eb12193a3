"""Chemprop-v2-style transfer learning: an MPNN LightningModule (message_passing -> mean agg -> bn ->
predictor FFN, training_step / validation_step / configure_optimizers with Adam and a warmup-then-decay
LambdaLR ticked per step) is pretrained on a large dataset and saved; the train script then loads it with
load_from_file(), "freezes the encoder" with model.message_passing.apply(lambda m: m.requires_grad_(False))
and model.bn.apply(lambda m: m.requires_grad_(False)), and hands it to a Lightning-like Trainer.fit() on a
small, shifted target dataset. requires_grad does not stop BatchNorm: the bn layer is still in train mode,
so every small fine-tuning batch is normalised with its own statistics and rewrites the pretrained
running_mean / running_var, and the "frozen" fingerprint the FFN sees at validation differs from the one it
was fitted on. Fix: also put the frozen bn (and encoder) in eval mode (model.bn.eval()).
Thread: https://github.com/chemprop/chemprop/pull/952
"""
import copy
import io

import torch
import torch.nn as nn
import torch.nn.functional as F

ATOM_DIM, HIDDEN, N_ATOMS = 12, 48, 6


# ----------------------------------------------------------------------------- data ("molecules")
def make_molecules(n, shift, seed):
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(n, N_ATOMS, ATOM_DIM, generator=g) + shift * torch.linspace(-1, 1, ATOM_DIM)
    w = torch.randn(ATOM_DIM, generator=torch.Generator().manual_seed(3))
    y = torch.tanh(V @ w / ATOM_DIM ** 0.5).mean(1, keepdim=True) * 3.0 + 0.05 * torch.randn(n, 1, generator=g)
    return list(zip(V, y))


def collate(batch):
    V = torch.cat([v for v, _ in batch])                                  # (sum atoms, ATOM_DIM)
    index = torch.arange(len(batch)).repeat_interleave(N_ATOMS)          # molecule of each atom
    return V, index, torch.stack([y for _, y in batch])


# ----------------------------------------------------------------------------- model
class BondMessagePassing(nn.Module):
    def __init__(self):
        super().__init__()
        self.W_i = nn.Linear(ATOM_DIM, HIDDEN)
        self.W_h = nn.Linear(HIDDEN, HIDDEN)
        self.output_dim = HIDDEN

    def forward(self, V, index):
        H = F.relu(self.W_i(V))
        return F.relu(self.W_h(H) + H)


class MeanAggregation(nn.Module):
    def forward(self, H, index):
        n = int(index.max()) + 1
        out = torch.zeros(n, H.shape[1]).index_add_(0, index, H)
        return out / torch.bincount(index, minlength=n).unsqueeze(1)


class RegressionFFN(nn.Module):
    def __init__(self):
        super().__init__()
        self.ffn = nn.Sequential(nn.Linear(HIDDEN, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, Z):
        return self.ffn(Z)

    def train_step(self, Z):
        return self.ffn(Z)


class MPNN(nn.Module):
    def __init__(self, init_lr=1e-4, max_lr=1e-3, final_lr=1e-4, warmup_epochs=2):
        super().__init__()
        self.message_passing = BondMessagePassing()
        self.agg = MeanAggregation()
        self.bn = nn.BatchNorm1d(self.message_passing.output_dim)
        self.predictor = RegressionFFN()
        self.init_lr, self.max_lr, self.final_lr, self.warmup_epochs = init_lr, max_lr, final_lr, warmup_epochs
        self.trainer = None

    def fingerprint(self, V, index):
        H_v = self.message_passing(V, index)
        H = self.agg(H_v, index)
        return self.bn(H)

    def forward(self, V, index):
        return self.predictor(self.fingerprint(V, index))

    def training_step(self, batch, batch_idx):
        V, index, targets = batch
        Z = self.fingerprint(V, index)
        preds = self.predictor.train_step(Z)
        return F.mse_loss(preds, targets)

    def on_validation_model_eval(self):
        self.eval()

    def validation_step(self, batch, batch_idx=0):
        V, index, targets = batch
        return F.mse_loss(self(V, index), targets, reduction="sum")

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), self.init_lr)
        steps_per_epoch = self.trainer.num_training_batches
        warmup = self.warmup_epochs * steps_per_epoch
        cooldown = (self.trainer.max_epochs - self.warmup_epochs) * steps_per_epoch
        gamma = (self.final_lr / self.max_lr) ** (1 / cooldown)

        def lr_lambda(step):                                             # Noam-like, as a factor of init_lr
            if step < warmup:
                return (self.init_lr + step * (self.max_lr - self.init_lr) / warmup) / self.init_lr
            return self.max_lr * gamma ** (step - warmup) / self.init_lr

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def save(self, buf):
        torch.save({"state_dict": self.state_dict()}, buf)

    @classmethod
    def load_from_file(cls, buf):
        buf.seek(0)
        model = cls()
        model.load_state_dict(torch.load(buf)["state_dict"])
        return model


# ----------------------------------------------------------------------------- Lightning-like trainer
class Trainer:
    """Small stand-in for lightning.Trainer: keeps each submodule's train/eval mode across validation."""

    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, model, train_loader, val_loader):
        model.trainer = self
        self.num_training_batches = len(train_loader)
        cfg = model.configure_optimizers()
        opt, sched = cfg["optimizer"], cfg["lr_scheduler"]["scheduler"]
        for epoch in range(self.max_epochs):
            total = 0.0
            for i, batch in enumerate(train_loader):
                loss = model.training_step(batch, i)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                total += loss.item()
            modes = {m: m.training for m in model.modules()}          # like Lightning's _ModuleMode
            model.on_validation_model_eval()
            with torch.no_grad():
                val = sum(model.validation_step(b).item() for b in val_loader) / len(val_loader.dataset)
            for m, mode in modes.items():
                m.train(mode)
            if epoch % 5 == 4 or epoch == self.max_epochs - 1:
                print(f"epoch {epoch:2d}  train_loss {total / len(train_loader):.4f}  val_loss {val:.4f}")
        return val


def main():
    # ---- pretraining on a large source dataset
    torch.manual_seed(0)
    source = make_molecules(4096, shift=0.0, seed=1)
    src_loader = torch.utils.data.DataLoader(source, batch_size=64, shuffle=True, collate_fn=collate,
                                             generator=torch.Generator().manual_seed(0))
    pre = MPNN()
    print("pretraining")
    Trainer(max_epochs=10).fit(pre, src_loader, torch.utils.data.DataLoader(source[:512], batch_size=256,
                                                                          collate_fn=collate))
    buf = io.BytesIO()
    pre.save(buf)

    # ---- transfer learning on a small, shifted target dataset with the encoder frozen
    torch.manual_seed(1)
    train = make_molecules(160, shift=1.5, seed=2)
    val = make_molecules(1024, shift=1.5, seed=3)
    train_loader = torch.utils.data.DataLoader(train, batch_size=8, shuffle=True, collate_fn=collate,
                                               generator=torch.Generator().manual_seed(1))
    val_loader = torch.utils.data.DataLoader(val, batch_size=256, collate_fn=collate)

    model = MPNN.load_from_file(buf)
    model.message_passing.apply(lambda module: module.requires_grad_(False))
    model.bn.apply(lambda module: module.requires_grad_(False))
    mean0 = model.bn.running_mean.clone()
    enc0 = copy.deepcopy(model.message_passing.state_dict())

    print("fine-tuning the FFN on the frozen encoder")
    final_val = Trainer(max_epochs=20).fit(model, train_loader, val_loader)
    enc_moved = max((model.message_passing.state_dict()[k] - v).abs().max().item() for k, v in enc0.items())
    print(f"encoder weights moved by {enc_moved:.1e}; bn.running_mean moved by "
          f"{(model.bn.running_mean - mean0).abs().max().item():.3f} "
          f"(num_batches_tracked {int(model.bn.num_batches_tracked)})")
    print(f"final val_loss {final_val:.4f}")


if __name__ == "__main__":
    main()
