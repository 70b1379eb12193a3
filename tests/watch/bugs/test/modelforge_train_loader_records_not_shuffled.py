"""A modelforge-style neural network potential: a TorchDataset of conformers stored record by record
(all conformers of one molecule are contiguous), a LightningDataModule-like DataModule whose
setup() removes per-element self energies and splits with a RandomRecordSplittingStrategy (records
are permuted, then each record's conformer indices are appended in a block, so a whole molecule
stays in one split), a collate_conformers() that concatenates atoms and stacks energies, a small
SchNet-like per-atom network summed per molecule, and a TrainingAdapter with training_step /
validation_step. train_dataloader() builds its DataLoader without shuffle=True, so the training
set is walked in the stored order every epoch: each mini-batch holds the conformers of a single
molecule, and the network is pulled from one molecule's energy level to the next, batch after
batch, in the same sequence every epoch, instead of seeing mixed batches. Training finishes, but
the validation energy error stays well above what the same model reaches with shuffled batches.

Thread: https://github.com/choderalab/modelforge/pull/129
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

ELEMENTS = 3          # H, C, O -> 0, 1, 2
CONFS_PER_RECORD = 32


def build_records(n_records, seed):
    g = torch.Generator().manual_seed(seed)
    pair_depth = torch.tensor([[0.3, 0.6, 0.5], [0.6, 1.2, 0.9], [0.5, 0.9, 0.8]])
    Z, R, E, n_atoms = [], [], [], []
    for _ in range(n_records):
        n = int(torch.randint(3, 9, (1,), generator=g))
        z = torch.randint(0, ELEMENTS, (n,), generator=g)
        base = torch.randn(n, 3, generator=g) * 1.2
        for _ in range(CONFS_PER_RECORD):
            pos = base + 0.15 * torch.randn(n, 3, generator=g)
            d = torch.cdist(pos, pos) + torch.eye(n) * 1e3
            eps = pair_depth[z][:, z]
            well = -eps * torch.exp(-((d - 1.5) / 0.6) ** 2) + 0.3 * eps * torch.exp(-(d / 0.7) ** 2)
            energy = 0.5 * well.sum() + torch.tensor([-0.5, -3.0, -2.0])[z].sum()
            Z.append(z); R.append(pos); E.append(energy); n_atoms.append(n)
    return Z, R, torch.stack(E), n_atoms


class TorchDataset(Dataset):
    def __init__(self, Z, R, E, n_records):
        self.Z, self.R, self.E = Z, R, E.clone()
        self.n_records = n_records

    def __len__(self):
        return len(self.E)

    def record_len(self):
        return self.n_records

    def get_series_mol_idxs(self, record_idx):
        start = record_idx * CONFS_PER_RECORD
        return list(range(start, start + CONFS_PER_RECORD))

    def __getitem__(self, i):
        return {"Z": self.Z[i], "R": self.R[i], "E": self.E[i]}


class RandomRecordSplittingStrategy:
    def __init__(self, seed=42, split=(0.8, 0.1, 0.1)):
        self.generator = torch.Generator().manual_seed(seed)
        self.split_fracs = split

    def split(self, dataset):
        n = dataset.record_len()
        lengths = [int(n * f) for f in self.split_fracs]
        lengths[0] += n - sum(lengths)
        record_indices = torch.randperm(n, generator=self.generator).tolist()
        subsets, offset = [], 0
        for length in lengths:
            idx = []
            for rec in record_indices[offset:offset + length]:
                idx.extend(dataset.get_series_mol_idxs(rec))
            subsets.append(Subset(dataset, idx))
            offset += length
        return subsets


def collate_conformers(conf_list):
    Z = torch.cat([c["Z"] for c in conf_list])
    R = torch.cat([c["R"] for c in conf_list])
    E = torch.stack([c["E"] for c in conf_list])
    counts = torch.tensor([len(c["Z"]) for c in conf_list])
    subsystem = torch.repeat_interleave(torch.arange(len(conf_list)), counts)
    return {"atomic_numbers": Z, "positions": R, "atomic_subsystem_indices": subsystem, "E": E}


class DataModule:
    def __init__(self, Z, R, E, n_records, batch_size=32,
                 splitting_strategy=RandomRecordSplittingStrategy()):
        self.torch_dataset = TorchDataset(Z, R, E, n_records)
        self.batch_size = batch_size
        self.splitting_strategy = splitting_strategy

    def setup(self):
        ds = self.torch_dataset
        counts = torch.stack([torch.bincount(z, minlength=ELEMENTS).float() for z in ds.Z])
        self_energies = torch.linalg.lstsq(counts, ds.E[:, None]).solution[:, 0]
        ds.E = ds.E - counts @ self_energies
        self.train_dataset, self.val_dataset, self.test_dataset = self.splitting_strategy.split(ds)
        e = ds.E[self.train_dataset.indices]
        self.E_mean, self.E_std = e.mean(), e.std()
        print(f"conformers -- train {len(self.train_dataset)}  val {len(self.val_dataset)}"
              f"  test {len(self.test_dataset)}  energy std {self.E_std:.3f}")

    def train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.batch_size,
                          collate_fn=collate_conformers)

    def val_dataloader(self):
        return DataLoader(self.val_dataset, batch_size=self.batch_size,
                          collate_fn=collate_conformers)


class SchNetLike(nn.Module):
    def __init__(self, n_rbf=16, hidden=48, cutoff=5.0):
        super().__init__()
        self.embedding = nn.Embedding(ELEMENTS, hidden)
        self.register_buffer("centers", torch.linspace(0.5, cutoff, n_rbf))
        self.filter = nn.Sequential(nn.Linear(n_rbf, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.interaction = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.readout = nn.Sequential(nn.Linear(hidden, hidden // 2), nn.SiLU(), nn.Linear(hidden // 2, 1))

    def forward(self, batch):
        z, pos, mol = batch["atomic_numbers"], batch["positions"], batch["atomic_subsystem_indices"]
        h = self.embedding(z)
        same = (mol[:, None] == mol[None, :]) & ~torch.eye(len(z), dtype=torch.bool)
        i, j = same.nonzero(as_tuple=True)
        d = (pos[i] - pos[j]).norm(dim=-1)
        rbf = torch.exp(-4.0 * (d[:, None] - self.centers) ** 2)
        messages = torch.zeros_like(h).index_add(0, i, self.filter(rbf) * h[j])
        h = h + self.interaction(messages)
        atomic_e = self.readout(h)[:, 0]
        n_mol = int(mol.max()) + 1
        return torch.zeros(n_mol).index_add(0, mol, atomic_e)


class TrainingAdapter:
    def __init__(self, model, lr, E_mean, E_std):
        self.model, self.E_mean, self.E_std = model, E_mean, E_std
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def training_step(self, batch):
        pred = self.model(batch)
        return F.mse_loss(pred, (batch["E"] - self.E_mean) / self.E_std)

    @torch.no_grad()
    def validation_step(self, batch):
        pred = self.model(batch) * self.E_std + self.E_mean
        return F.l1_loss(pred, batch["E"], reduction="sum"), len(batch["E"])


def main():
    torch.manual_seed(0)
    Z, R, E, _ = build_records(n_records=60, seed=1)
    dm = DataModule(Z, R, E, n_records=60, batch_size=32)
    dm.setup()
    adapter = TrainingAdapter(SchNetLike(), lr=1e-3, E_mean=dm.E_mean, E_std=dm.E_std)
    step = 0
    for epoch in range(4):
        adapter.model.train()
        for batch in dm.train_dataloader():
            loss = adapter.training_step(batch)
            adapter.optimizer.zero_grad()
            loss.backward()
            adapter.optimizer.step()
            step += 1
        adapter.model.eval()
        err, n = 0.0, 0
        for batch in dm.val_dataloader():
            s, k = adapter.validation_step(batch)
            err, n = err + s.item(), n + k
        print(f"epoch {epoch}  step {step}  train_loss {loss.item():.4f}  val_energy_mae {err / n:.4f}")


if __name__ == "__main__":
    main()
