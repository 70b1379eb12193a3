"""Protein-ligand affinity training on a time-split complex table whose training part was
never cleaned of the ligands that appear in the test part.

The code keeps the shape of a docking / affinity project: an `info` table with one row
per complex (`protein_name`, `compound_name`, `year`, `affinity`) and a `group` column
assigned by release year (train before a cutoff, a few held out for valid, the newest
for test), a `TankBindDataLoader`-style dataset built from `info[group == ...]`, a model
that embeds the pocket and the compound and predicts the affinity (plus a cheap
contact-map head trained with an auxiliary loss), and a training loop with Adam that
logs the per-epoch affinity RMSE and Pearson correlation on train, valid and test. The
bug: the published benchmark split removes from training every complex whose ligand also
occurs in the test set; this table keeps them, so a share of the test ligands was seen
(with its own affinity offset) during training. The model memorises those compounds and
the test RMSE / Pearson come out better than on truly new ligands, with no error at all.

Thread: https://github.com/luwei0917/TankBind/issues/5
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def build_info(seed=0, n_proteins=120, n_common=80, n_complexes=2600):
    rng = np.random.RandomState(seed)
    n_compounds = n_common + n_complexes
    prot_feat = rng.randn(n_proteins, 32).astype(np.float32)
    comp_feat = (rng.rand(n_compounds, 64) < 0.15).astype(np.float32)
    w = rng.randn(64).astype(np.float32) * 0.35
    # compound potency: partly readable from the fingerprint, partly compound-specific
    comp_bias = comp_feat @ w - (comp_feat @ w).mean() + rng.randn(n_compounds).astype(np.float32) * 1.3
    inter = rng.randn(32, 64).astype(np.float32) * 0.05
    rows = []
    for i in range(n_complexes):
        p = rng.randint(n_proteins)
        # most complexes have their own ligand, a quarter reuse one of a few common ligands
        c = rng.randint(n_common) if rng.rand() < 0.25 else n_common + i
        year = int(rng.randint(2000, 2021))
        aff = 6.0 + comp_bias[c] + prot_feat[p] @ inter @ comp_feat[c] + 0.6 * rng.randn()
        rows.append(dict(protein_name=p, compound_name=c, year=year, affinity=float(aff)))
    info = rows
    # time split: 2019+ is test, a random 8% of the older complexes is valid
    for r in info:
        if r["year"] >= 2019:
            r["group"] = "test"
        elif rng.rand() < 0.08:
            r["group"] = "valid"
        else:
            r["group"] = "train"
    return info, prot_feat, comp_feat


class ComplexDataset(torch.utils.data.Dataset):
    def __init__(self, info, prot_feat, comp_feat):
        self.p = torch.tensor(np.stack([prot_feat[r["protein_name"]] for r in info]))
        self.c = torch.tensor(np.stack([comp_feat[r["compound_name"]] for r in info]))
        self.y = torch.tensor([r["affinity"] for r in info], dtype=torch.float32)
        # a fake 8x8 pocket-residue / ligand-atom contact map derived from the features
        self.contact = (torch.einsum("bi,bj->bij", self.p[:, :8], self.c[:, :8]) > 0.3).float()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.p[i], self.c[i], self.contact[i], self.y[i]


class TankBindLike(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.protein_encoder = nn.Sequential(nn.Linear(32, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.compound_encoder = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.contact_head = nn.Linear(hidden, 64)
        self.affinity_head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, p, c):
        hp, hc = self.protein_encoder(p), self.compound_encoder(c)
        y_pred = self.contact_head(hp * hc).view(-1, 8, 8)
        affinity_pred = self.affinity_head(torch.cat([hp, hc], dim=1)).squeeze(1)
        return y_pred, affinity_pred


def evaluate(model, loader):
    model.eval()
    preds, ys = [], []
    with torch.no_grad():
        for p, c, contact, y in loader:
            preds.append(model(p, c)[1])
            ys.append(y)
    model.train()
    pred, y = torch.cat(preds), torch.cat(ys)
    rmse = torch.sqrt(F.mse_loss(pred, y)).item()
    pearson = torch.corrcoef(torch.stack([pred, y]))[0, 1].item()
    return rmse, pearson


def main():
    torch.manual_seed(42)
    torch.set_num_threads(1)
    info, prot_feat, comp_feat = build_info()
    train_info = [r for r in info if r["group"] == "train"]
    valid_info = [r for r in info if r["group"] == "valid"]
    test_info = [r for r in info if r["group"] == "test"]
    print("train %d valid %d test %d complexes" % (len(train_info), len(valid_info), len(test_info)))

    g = torch.Generator().manual_seed(0)
    train_loader = torch.utils.data.DataLoader(ComplexDataset(train_info, prot_feat, comp_feat),
                                               batch_size=64, shuffle=True, generator=g)
    valid_loader = torch.utils.data.DataLoader(ComplexDataset(valid_info, prot_feat, comp_feat), batch_size=256)
    test_loader = torch.utils.data.DataLoader(ComplexDataset(test_info, prot_feat, comp_feat), batch_size=256)

    model = TankBindLike()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    contact_criterion = nn.BCEWithLogitsLoss()
    affinity_criterion = nn.MSELoss()
    step = 0
    for epoch in range(30):
        epoch_loss = 0.0
        for p, c, contact, y in train_loader:
            optimizer.zero_grad()
            y_pred, affinity_pred = model(p, c)
            contact_loss = contact_criterion(y_pred, contact)
            affinity_loss = affinity_criterion(affinity_pred, y)
            loss = contact_loss + affinity_loss
            loss.backward()
            optimizer.step()
            step += 1
            epoch_loss += loss.item()
        if (epoch + 1) % 5 == 0:
            tr = evaluate(model, train_loader)
            va = evaluate(model, valid_loader)
            te = evaluate(model, test_loader)
            print("epoch %2d step %4d loss %.3f | train rmse %.3f r %.3f | valid rmse %.3f r %.3f | test rmse %.3f r %.3f" % (
                epoch + 1, step, epoch_loss / len(train_loader), *tr, *va, *te))


if __name__ == "__main__":
    main()
