"""An EEG-to-image retrieval script run leave-one-subject-out: main() builds the EEG encoder (a
temporal convolution, a per-subject linear layer over time, a flatten and a residual projection
head with a learnable logit scale) and the image projection once, and one AdamW over both. It then
loops over subjects; for each held-out subject it builds a train set from the other subjects and a
test set from the held-out one and calls main_train_loop(), which runs train_model() (CLIP-style
contrastive loss against image and text features) and evaluate_model() (k-way retrieval accuracy
on unseen concepts) every epoch. The model and the optimizer are never re-created between folds,
so from the second fold on the encoder has already been trained on the held-out subject's EEG in
an earlier fold, and the cross-subject test accuracy is inflated.

Thread: https://github.com/dongyangli-del/EEG_Image_decode/issues/7
"""
import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

N_SUBJ, CH, T, D = 4, 16, 32, 24
N_TRAIN_CONCEPTS, N_TEST_CONCEPTS, REPS = 60, 20, 4


def make_world(seed=0):
    g = torch.Generator().manual_seed(seed)
    concepts = torch.randn(N_TRAIN_CONCEPTS + N_TEST_CONCEPTS, D, generator=g)
    mixing = [torch.randn(CH, D, generator=g) / D ** 0.5 for _ in range(N_SUBJ)]
    waves = [torch.sin(torch.linspace(0, 3.0 + s, T)) for s in range(N_SUBJ)]

    def record(subj, ids, reps):
        z = concepts[ids].repeat_interleave(reps, 0)
        x = (z @ mixing[subj].T).unsqueeze(-1) * waves[subj] + 0.6 * torch.randn(len(z), CH, T, generator=g)
        return x, ids.repeat_interleave(reps)

    text = concepts + 0.3 * torch.randn(concepts.shape, generator=g)
    return concepts, text, record


class EEGEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tsconv = nn.Sequential(nn.Conv1d(CH, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ELU(), nn.Dropout(0.3))
        self.subject_wise_linear = nn.ModuleList([nn.Linear(T, T)])
        self.proj = nn.Linear(32 * T, 64)
        self.res = nn.Sequential(nn.GELU(), nn.Linear(64, 64), nn.Dropout(0.3))
        self.out = nn.Sequential(nn.LayerNorm(64), nn.Linear(64, D))
        self.logit_scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        h = self.subject_wise_linear[0](self.tsconv(x)).flatten(1)
        h = self.proj(h)
        return self.out(h + self.res(h))


def clip_loss(a, b, scale):
    logits = scale.exp() * F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T
    target = torch.arange(len(a))
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


def train_model(eeg_model, img_model, loader, optimizer, img_all, text_all, alpha=0.9):
    eeg_model.train(); img_model.train()
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        e = eeg_model(x)
        loss = alpha * clip_loss(e, img_model(img_all[y]), eeg_model.logit_scale) \
            + (1 - alpha) * clip_loss(e, text_all[y], eeg_model.logit_scale)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


@torch.no_grad()
def evaluate_model(eeg_model, img_model, loader, img_all, test_ids, k=10, seed=0):
    eeg_model.eval(); img_model.eval()
    g = torch.Generator().manual_seed(seed)
    correct = n = 0
    for x, y in loader:
        e = F.normalize(eeg_model(x), dim=-1)
        for i, label in enumerate(y.tolist()):
            others = test_ids[test_ids != label]
            cand = torch.cat([others[torch.randperm(len(others), generator=g)[:k - 1]], torch.tensor([label])])
            sims = e[i] @ F.normalize(img_model(img_all[cand]), dim=-1).T
            correct += int(cand[sims.argmax()].item() == label); n += 1
    return correct / n


def main_train_loop(sub, eeg_model, img_model, train_loader, test_loader, optimizer, img_all, text_all, test_ids, config):
    for epoch in range(config["epochs"]):
        train_loss = train_model(eeg_model, img_model, train_loader, optimizer, img_all, text_all)
        test_acc = evaluate_model(eeg_model, img_model, test_loader, img_all, test_ids)
        print(f"held-out sub-{sub:02d} epoch {epoch + 1}: train loss {train_loss:.3f}  10-way test acc {test_acc:.3f}")
    return test_acc


def main():
    torch.manual_seed(0)
    config = {"lr": 3e-3, "epochs": 5, "batch_size": 64}
    img_all, text_all, record = make_world()
    eeg_model = EEGEncoder()
    img_model = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, D))
    optimizer = torch.optim.AdamW(itertools.chain(eeg_model.parameters(), img_model.parameters()), lr=config["lr"])
    train_ids = torch.arange(N_TRAIN_CONCEPTS)
    test_ids = torch.arange(N_TRAIN_CONCEPTS, N_TRAIN_CONCEPTS + N_TEST_CONCEPTS)
    results = []
    for sub in range(N_SUBJ):
        parts = [record(s, train_ids, REPS) for s in range(N_SUBJ) if s != sub]
        train_set = TensorDataset(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))
        test_set = TensorDataset(*record(sub, test_ids, 1))
        train_loader = DataLoader(train_set, batch_size=config["batch_size"], shuffle=True, drop_last=True,
                                  generator=torch.Generator().manual_seed(sub))
        test_loader = DataLoader(test_set, batch_size=32)
        results.append(main_train_loop(sub, eeg_model, img_model, train_loader, test_loader, optimizer,
                                       img_all, text_all, test_ids, config))
    print("cross-subject test acc per fold:", [round(r, 3) for r in results])


if __name__ == "__main__":
    main()
