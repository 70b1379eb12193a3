"""A CTR ranking model in the TorchEasyRec (tzrec) layout: sparse id features go through embedding
tables whose optimizer is fused into the backward pass (the TorchRec apply_optimizer_in_backward
pattern: each embedding row is updated by a row-wise Adagrad as soon as its gradient is
accumulated), while the dense part (a feature MLP tower plus the final MLP over the concatenated
towers) is trained by a dense Adam held in a keyed wrapper. Both are combined into one optimizer
and wrapped by TZRecOptimizer, a wrapper that exists to add gradient accumulation and a grad
scaler; the training loop calls optimizer.zero_grad(), forward, loss.backward(),
optimizer.step() every batch. The wrapper only forwards zero_grad() and step() when
`gradient_accumulation_steps > 1 and step % gradient_accumulation_steps == 0`, so with the default
of one step per batch the condition is never true: the dense Adam never steps (and never clears its
gradients). Training still runs and the loss still falls a little, because the embedding tables are
updated inside backward, but every dense layer stays at its random initialisation, so the model
cannot use the dense features and its AUC stays well below what it should reach.

Thread: https://github.com/alibaba/TorchEasyRec/pull/226
"""
import numpy as np
import torch
from torch import nn


# ----------------------------------------------------------------------------- data
def make_clicks(n, n_users, n_items, seed):
    g = torch.Generator().manual_seed(seed)
    users = torch.randint(0, n_users, (n,), generator=g)
    items = torch.randint(0, n_items, (n,), generator=g)
    dense = torch.randn(n, 8, generator=g)
    u_bias = torch.randn(n_users, generator=torch.Generator().manual_seed(seed + 1)) * 0.5
    i_bias = torch.randn(n_items, generator=torch.Generator().manual_seed(seed + 2)) * 0.5
    logit = (1.5 * dense[:, 0] - 1.2 * dense[:, 1] + 1.0 * dense[:, 2] * dense[:, 3]
             + torch.tanh(2 * dense[:, 4]) + u_bias[users] + i_bias[items] - 0.3)
    label = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return users, items, dense, label


def auc(scores, labels):
    order = np.argsort(scores)
    ranks = np.empty(len(scores)); ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


# ----------------------------------------------------------------------------- optimizers
def apply_optimizer_in_backward(params, lr=0.05, eps=1e-8):
    """Row-wise Adagrad applied from a post-accumulate-grad hook (fused into backward)."""
    for p in params:
        state = torch.zeros(p.shape[0])

        def hook(t, state=state):
            g = t.grad
            with torch.no_grad():
                state.add_(g.pow(2).mean(dim=1))
                t.add_(-lr * g / (state.sqrt().unsqueeze(1) + eps))
            t.grad = None
        p.register_post_accumulate_grad_hook(hook)
        p._in_backward_optimizer = True


class KeyedOptimizerWrapper:
    def __init__(self, named_params, optim_factory):
        self.params = dict(named_params)
        self._opt = optim_factory(list(self.params.values()))

    def step(self, closure=None):
        self._opt.step(closure)

    def zero_grad(self, set_to_none=True):
        self._opt.zero_grad(set_to_none=set_to_none)


class FusedOptimizer:
    """The in-backward embedding optimizer: step/zero_grad are no-ops."""

    def step(self, closure=None):
        pass

    def zero_grad(self, set_to_none=True):
        pass


class CombinedOptimizer:
    def __init__(self, optims):
        self.optims = optims

    def step(self, closure=None):
        for o in self.optims:
            o.step(closure)

    def zero_grad(self, set_to_none=True):
        for o in self.optims:
            o.zero_grad(set_to_none=set_to_none)


class TZRecOptimizer:
    """Wrapper for gradient accumulation / grad scaler."""

    def __init__(self, optimizer, grad_scaler=None, gradient_accumulation_steps=1):
        self._optimizer = optimizer
        self._step = 0
        self._grad_scaler = grad_scaler
        self._gradient_accumulation_steps = gradient_accumulation_steps

    def zero_grad(self, set_to_none=True):
        if (self._gradient_accumulation_steps > 1
                and self._step % self._gradient_accumulation_steps == 0):
            self._optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        self._step += 1
        if (self._gradient_accumulation_steps > 1
                and self._step % self._gradient_accumulation_steps == 0):
            if self._grad_scaler is not None:
                self._grad_scaler.step(self._optimizer)
                self._grad_scaler.update()
            else:
                self._optimizer.step(closure=closure)


# ----------------------------------------------------------------------------- model
class MultiTower(nn.Module):
    def __init__(self, n_users, n_items, emb_dim=8):
        super().__init__()
        self.user_emb = nn.Embedding(n_users, emb_dim)
        self.item_emb = nn.Embedding(n_items, emb_dim)
        nn.init.normal_(self.user_emb.weight, std=0.05)
        nn.init.normal_(self.item_emb.weight, std=0.05)
        self.dense_tower = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.final_mlp = nn.Sequential(nn.Linear(16 + 2 * emb_dim, 32), nn.ReLU())
        self.output = nn.Linear(32, 1)

    def forward(self, users, items, dense):
        x = torch.cat([self.dense_tower(dense), self.user_emb(users), self.item_emb(items)], dim=1)
        return self.output(self.final_mlp(x)).squeeze(-1)

    def loss(self, logits, label):
        return nn.functional.binary_cross_entropy_with_logits(logits, label)


def in_backward_optimizer_filter(named_parameters):
    return [(n, p) for n, p in named_parameters if not getattr(p, "_in_backward_optimizer", False)]


def train_and_evaluate(model, optimizer, train, evals, epochs, batch_size):
    users, items, dense, label = train
    n = len(label)
    g = torch.Generator().manual_seed(0)
    step = 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            optimizer.zero_grad()
            logits = model(users[idx], items[idx], dense[idx])
            loss = model.loss(logits, label[idx])
            loss.backward()
            optimizer.step()
            step += 1
        model.eval()
        with torch.no_grad():
            eu, ei, ed, el = evals
            elog = model(eu, ei, ed)
            eloss = model.loss(elog, el).item()
            eauc = auc(elog.numpy(), el.numpy())
        print(f"epoch {epoch} step {step:4d} train_loss {loss.item():.4f} eval_loss {eloss:.4f} "
              f"eval_auc {eauc:.4f}")


def main():
    torch.manual_seed(0)
    n_users, n_items = 500, 300
    data = make_clicks(30000, n_users, n_items, seed=0)
    train = tuple(t[:24000] for t in data)
    evals = tuple(t[24000:] for t in data)
    model = MultiTower(n_users, n_items)
    apply_optimizer_in_backward([model.user_emb.weight, model.item_emb.weight])
    dense_optimizer = KeyedOptimizerWrapper(
        in_backward_optimizer_filter(model.named_parameters()),
        lambda params: torch.optim.Adam(params, lr=2e-3))
    optimizer = TZRecOptimizer(CombinedOptimizer([FusedOptimizer(), dense_optimizer]),
                               grad_scaler=None, gradient_accumulation_steps=1)
    train_and_evaluate(model, optimizer, train, evals, epochs=6, batch_size=256)


if __name__ == "__main__":
    main()
