"""A distributional ("LSS") tabular regressor in the Mambular / DeepTab layout: a datamodule
preprocesses the numerical and categorical columns and builds TensorDatasets whose regression
labels are made 2-D with `unsqueeze(dim=1)`; a Lightning-style TaskModel wraps the backbone (an
MLP over embedded categoricals plus numericals) whose head emits the two parameters of a Normal
distribution, and its compute_loss() hands (predictions, y_true) to family.compute_loss(), the
NormalDistribution's negative log-likelihood. training_step / validation_step call compute_loss and
configure_optimizers returns Adam. The family slices the mean and variance as 1-D (B,) tensors but
receives the labels as (B, 1), so `Normal(mean, scale).log_prob(y_true)` broadcasts to a (B, B)
grid and the NLL is averaged over every (row, other row's target) pair. No error or warning is
raised; the model learns to predict roughly the batch-wide target distribution for every row, so
the mean it predicts barely depends on the features and the validation RMSE stays near the
target's standard deviation.

Thread: https://github.com/OpenTabular/DeepTab/pull/83
"""
import numpy as np
import torch
from torch import nn
import torch.distributions as dist


# ----------------------------------------------------------------------------- data
def make_table(n, seed):
    rng = np.random.default_rng(seed)
    num = rng.normal(size=(n, 6)).astype(np.float32)
    cat = rng.integers(0, 5, size=(n, 2))
    cat_effect = np.array([-1.5, -0.5, 0.0, 0.7, 1.6], dtype=np.float32)
    y = (1.2 * num[:, 0] - 0.8 * num[:, 1] + 0.5 * num[:, 2] * num[:, 3]
         + cat_effect[cat[:, 0]] + 0.3 * rng.normal(size=n)).astype(np.float32)
    return num, cat, y


class TabularDataModule:
    def __init__(self, batch_size=128, seed=0):
        self.batch_size = batch_size
        self.seed = seed

    def setup(self):
        num, cat, y = make_table(3000, self.seed)
        split = 2400
        mean, std = num[:split].mean(0), num[:split].std(0)
        num = (num - mean) / std
        self.y_mean, self.y_std = y[:split].mean(), y[:split].std()
        y = (y - self.y_mean) / self.y_std
        tensors = []
        for sl in (slice(0, split), slice(split, None)):
            labels = torch.tensor(y[sl], dtype=torch.float32).unsqueeze(dim=1)  # (N, 1) labels
            tensors.append(torch.utils.data.TensorDataset(
                torch.tensor(cat[sl], dtype=torch.long), torch.tensor(num[sl]), labels))
        self.train_ds, self.val_ds = tensors

    def train_dataloader(self):
        g = torch.Generator().manual_seed(self.seed)
        return torch.utils.data.DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True, generator=g)

    def val_dataloader(self):
        return torch.utils.data.DataLoader(self.val_ds, batch_size=256)


# ----------------------------------------------------------------------------- family
class NormalDistribution(nn.Module):
    param_names = ["mean", "variance"]

    def __init__(self):
        super().__init__()
        self.mean_transform = lambda x: x
        self.variance_transform = nn.functional.softplus

    @property
    def parameter_count(self):
        return len(self.param_names)

    def compute_loss(self, predictions, y_true):
        mean = self.mean_transform(predictions[:, self.param_names.index("mean")])            # (B,)
        variance = self.variance_transform(predictions[:, self.param_names.index("variance")])  # (B,)
        normal_dist = dist.Normal(mean, variance)
        nll = -normal_dist.log_prob(y_true).mean()
        return nll


# ----------------------------------------------------------------------------- model
class MLPBackbone(nn.Module):
    def __init__(self, n_num, cat_cards, out_dim, d=16, hidden=64):
        super().__init__()
        self.embeds = nn.ModuleList([nn.Embedding(c, d) for c in cat_cards])
        self.net = nn.Sequential(nn.Linear(n_num + d * len(cat_cards), hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def forward(self, num_features, cat_features):
        emb = [e(cat_features[:, i]) for i, e in enumerate(self.embeds)]
        return self.net(torch.cat([num_features] + emb, dim=1))


class TaskModel(nn.Module):
    """Minimal stand-in for the LightningModule wrapper."""

    def __init__(self, family, lr=1e-3, weight_decay=1e-5):
        super().__init__()
        self.lss = True
        self.family = family
        self.model = MLPBackbone(6, [5, 5], family.parameter_count)
        self.lr, self.weight_decay = lr, weight_decay

    def forward(self, num_features, cat_features):
        return self.model(num_features, cat_features)

    def compute_loss(self, predictions, y_true):
        if self.lss:
            return self.family.compute_loss(predictions, y_true)
        return self.loss_fct(predictions, y_true)

    def training_step(self, batch, batch_idx):
        cat_features, num_features, labels = batch
        preds = self(num_features=num_features, cat_features=cat_features)
        return self.compute_loss(preds, labels)

    def validation_step(self, batch, batch_idx):
        cat_features, num_features, labels = batch
        preds = self(num_features=num_features, cat_features=cat_features)
        val_loss = self.compute_loss(preds, labels)
        mean = preds[:, 0]
        sq_err = ((mean - labels.view(-1)) ** 2).sum()
        return val_loss, sq_err, labels.numel()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, dm):
        dm.setup()
        opt = module.configure_optimizers()
        step = 0
        for epoch in range(self.max_epochs):
            module.train()
            for batch_idx, batch in enumerate(dm.train_dataloader()):
                loss = module.training_step(batch, batch_idx)
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
            module.eval()
            with torch.no_grad():
                losses, sq, n = [], 0.0, 0
                for batch_idx, batch in enumerate(dm.val_dataloader()):
                    vl, s, k = module.validation_step(batch, batch_idx)
                    losses.append(vl.item()); sq += s.item(); n += k
            rmse = (sq / n) ** 0.5 * dm.y_std
            if epoch % 3 == 0 or epoch == self.max_epochs - 1:
                print(f"epoch {epoch:2d} step {step:4d} train_loss {loss.item():.4f} "
                      f"val_loss {np.mean(losses):.4f} val_rmse {rmse:.3f} (target std {dm.y_std:.3f})")


def main():
    torch.manual_seed(0)
    dm = TabularDataModule(batch_size=128, seed=0)
    module = TaskModel(NormalDistribution(), lr=1e-3)
    Trainer(max_epochs=15).fit(module, dm)


if __name__ == "__main__":
    main()
