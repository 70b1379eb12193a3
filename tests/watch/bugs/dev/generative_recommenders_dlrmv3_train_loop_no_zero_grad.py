"""A DLRMv3-style ranking trainer from a generative-recommendation codebase: a train_loop(rank,
model, dataloader, optimizer, metric_logger, device, num_epochs, ...) helper that puts the model in
train mode, moves each batch with sample.to(device), calls model.forward(uih_features,
candidates_features) which returns a tuple ending in a dict of per-task auxiliary losses plus the
multi-task predictions, labels and weights, then backpropagates sum(aux_losses.values()), steps
the dense Adam optimizer and feeds a metrics logger that prints AUC and normalised entropy. The
loop never calls optimizer.zero_grad(): every backward adds onto the gradients of all previous
batches, so each Adam step follows the running sum of the whole history instead of the current
batch, and the multi-task ranker trains to a much worse loss and AUC than it should while the
run looks normal.

Thread: https://github.com/meta-recsys/generative-recommenders/pull/332
"""
import math
from typing import Dict, Optional

import torch
from torch import nn
import torch.nn.functional as F

NUM_USERS, NUM_ITEMS, HIST_LEN, LATENT = 400, 200, 16, 4
TASKS = ("is_click", "is_like")


class Sample:
    def __init__(self, uih_features, candidates_features, labels):
        self.uih_features = uih_features            # user interaction history: item ids (B, L)
        self.candidates_features = candidates_features  # candidate item ids (B,)
        self.labels = labels                        # (B, num_tasks)

    def to(self, device):
        self.uih_features = self.uih_features.to(device)
        self.candidates_features = self.candidates_features.to(device)
        self.labels = self.labels.to(device)
        return self


class SyntheticKuaiRandLike(torch.utils.data.Dataset):
    """Users watch items that match a hidden taste vector; labels depend on taste . item."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        gw = torch.Generator().manual_seed(1234)          # shared world: same users/items for all splits
        self.item_vec = torch.randn(NUM_ITEMS, LATENT, generator=gw)
        self.user_vec = torch.randn(NUM_USERS, LATENT, generator=gw)
        users = torch.randint(0, NUM_USERS, (n,), generator=g)
        affinity = self.user_vec[users] @ self.item_vec.T            # (n, items)
        hist_p = torch.softmax(3.0 * affinity, dim=1)
        self.hist = torch.multinomial(hist_p, HIST_LEN, replacement=True, generator=g)
        self.cand = torch.randint(0, NUM_ITEMS, (n,), generator=g)
        score = (self.user_vec[users] * self.item_vec[self.cand]).sum(1)
        click = (torch.rand(n, generator=g) < torch.sigmoid(3.0 * score)).float()
        like = click * (torch.rand(n, generator=g) < torch.sigmoid(3.0 * score - 1.0)).float()
        self.labels = torch.stack([click, like], dim=1)

    def __len__(self):
        return len(self.cand)

    def __getitem__(self, i):
        return self.hist[i], self.cand[i], self.labels[i]


def collate_fn(batch):
    hist, cand, labels = zip(*batch)
    return Sample(torch.stack(hist), torch.stack(cand), torch.stack(labels))


class DlrmHSTU(nn.Module):
    """Tiny stand-in: item embeddings, attention pooling of the history against the candidate,
    a shared interaction MLP and one logit per task."""

    def __init__(self, dim=32):
        super().__init__()
        self.item_emb = nn.Embedding(NUM_ITEMS, dim)
        nn.init.normal_(self.item_emb.weight, std=0.1)
        self.query = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(3 * dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.task_heads = nn.Linear(64, len(TASKS))

    def forward(self, uih_features, candidates_features, labels=None):
        hist = self.item_emb(uih_features)                      # (B, L, D)
        cand = self.item_emb(candidates_features)               # (B, D)
        att = torch.softmax((hist @ self.query(cand).unsqueeze(-1)).squeeze(-1) / math.sqrt(hist.shape[-1]), dim=1)
        user = (att.unsqueeze(-1) * hist).sum(1)
        logits = self.task_heads(self.mlp(torch.cat([user, cand, user * cand], dim=1)))
        preds = torch.sigmoid(logits)
        weights = torch.ones_like(logits)
        aux_losses = {}
        if labels is not None:
            for t, name in enumerate(TASKS):
                aux_losses[name] = F.binary_cross_entropy_with_logits(logits[:, t], labels[:, t])
        return user, cand, aux_losses, preds, labels, weights


def auc(pred, label):
    order = torch.argsort(pred)
    ranks = torch.empty_like(pred)
    ranks[order] = torch.arange(1, len(pred) + 1, dtype=pred.dtype)
    pos = label > 0.5
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return ((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


class MetricsLogger:
    def __init__(self, prefix):
        self.prefix = prefix
        self.reset()

    def reset(self):
        self.preds, self.labels, self.weights = [], [], []

    def update(self, predictions, labels, weights):
        self.preds.append(predictions.detach())
        self.labels.append(labels.detach())
        self.weights.append(weights.detach())

    def compute(self):
        p, y = torch.cat(self.preds), torch.cat(self.labels)
        out = {}
        for t, name in enumerate(TASKS):
            pt = p[:, t].clamp(1e-6, 1 - 1e-6)
            ce = F.binary_cross_entropy(pt, y[:, t]).item()
            base = y[:, t].mean().clamp(1e-6, 1 - 1e-6).item()
            base_ce = -(base * math.log(base) + (1 - base) * math.log(1 - base))
            out[f"{self.prefix}/{name}_auc"] = auc(p[:, t], y[:, t])
            out[f"{self.prefix}/{name}_ne"] = ce / base_ce
        return out

    def compute_and_log(self, additional_logs=None, step=None):
        out = self.compute()
        if additional_logs is not None and "losses" in additional_logs:
            loss = sum(v.item() for v in additional_logs["losses"].values())
            print(f"  step {step:4d}  loss {loss:.4f}  "
                  + "  ".join(f"{k.split('/')[-1]} {v:.3f}" for k, v in out.items()))
        self.reset()
        return out


def train_loop(rank: int, model: nn.Module, dataloader, optimizer, metric_logger: MetricsLogger,
               device: torch.device, num_epochs: int, num_batches: Optional[int] = None,
               metric_log_frequency: int = 100) -> None:
    model = model.train()
    batch_idx = 0
    for _ in range(num_epochs):
        for sample in dataloader:
            sample.to(device)
            (_, _, aux_losses, mt_target_preds, mt_target_labels, mt_target_weights) = model.forward(
                sample.uih_features, sample.candidates_features, sample.labels)
            sum(aux_losses.values()).backward()
            optimizer.step()
            metric_logger.update(predictions=mt_target_preds, labels=mt_target_labels,
                                 weights=mt_target_weights)
            if batch_idx % metric_log_frequency == metric_log_frequency - 1:
                metric_logger.compute_and_log(additional_logs={"losses": aux_losses}, step=batch_idx + 1)
            batch_idx += 1
            if num_batches is not None and batch_idx >= num_batches:
                break
        if num_batches is not None and batch_idx >= num_batches:
            break


@torch.no_grad()
def eval_loop(rank: int, model: nn.Module, dataloader, metric_logger: MetricsLogger,
              device: torch.device) -> Dict[str, float]:
    model = model.eval()
    metric_logger.reset()
    for sample in dataloader:
        sample.to(device)
        (_, _, _, preds, labels, weights) = model.forward(sample.uih_features, sample.candidates_features,
                                                          sample.labels)
        metric_logger.update(predictions=preds, labels=labels, weights=weights)
    out = metric_logger.compute()
    for k, v in out.items():
        print(f"{k}: {v:.4f}")
    return out


def main():
    torch.manual_seed(0)
    device = torch.device("cpu")
    train_set, test_set = SyntheticKuaiRandLike(16384, seed=1), SyntheticKuaiRandLike(4096, seed=2)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True, drop_last=True,
                                               collate_fn=collate_fn,
                                               generator=torch.Generator().manual_seed(0))
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=512, shuffle=False, collate_fn=collate_fn)
    model = DlrmHSTU().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.95, 0.999), eps=1e-8)
    train_loop(0, model, train_loader, optimizer, MetricsLogger("train"), device, num_epochs=6)
    eval_loop(0, model, test_loader, MetricsLogger("eval"), device)


if __name__ == "__main__":
    main()
