"""A neural network potential trained on energies and forces through a Lightning-style TrainingAdapter.
A CalculateProperties module runs the potential on a batch of molecules flattened into one atom list
(atomic_subsystem_indices says which molecule each atom belongs to), then takes the forces as the
negative gradient of the summed energy with respect to the positions. A Loss module adds a
per-molecule energy MSE and a per-atom force MSE (scattered back to molecules and divided by the atom
count), each with weight 1. The force gradient is taken with torch.autograd.grad(..., create_graph=False,
retain_graph=True): the predicted forces come back as plain tensors with no graph to the weights, so
the force term adds to the logged loss but contributes no gradient. Only the energy is fitted, and the
force error stays where it started.

Thread: https://github.com/choderalab/modelforge/pull/240
"""
import torch
from torch import nn


def make_dataset(n_mol, g):
    data = []
    for _ in range(n_mol):
        n = int(torch.randint(3, 7, (1,), generator=g))
        pos = torch.randn(n, 3, generator=g) * 1.1
        i, j = torch.triu_indices(n, n, 1)
        p = pos.clone().requires_grad_(True)
        rr = torch.linalg.vector_norm(p[i] - p[j], dim=-1)
        e = ((1 - torch.exp(-1.3 * (rr - 1.4))) ** 2).sum()
        f = -torch.autograd.grad(e, p)[0]
        data.append((pos, e.detach(), f))
    return data


def collate(items):
    pos, idx, E, F, counts, pi, pj, off = [], [], [], [], [], [], [], 0
    for m, (p, e, f) in enumerate(items):
        n = p.shape[0]
        i, j = torch.triu_indices(n, n, 1)
        pos.append(p); F.append(f); E.append(e); counts.append(n)
        idx.append(torch.full((n,), m)); pi.append(i + off); pj.append(j + off)
        off += n
    return {"positions": torch.cat(pos).requires_grad_(True), "atomic_subsystem_indices": torch.cat(idx),
            "pair_i": torch.cat(pi), "pair_j": torch.cat(pj), "E": torch.stack(E)[:, None], "F": torch.cat(F),
            "atomic_subsystem_counts": torch.tensor(counts, dtype=torch.float32)}


class PairPotential(nn.Module):
    def __init__(self, n_rbf=16, hidden=32):
        super().__init__()
        self.register_buffer("centers", torch.linspace(0.5, 5.0, n_rbf))
        self.net = nn.Sequential(nn.Linear(n_rbf, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, b):
        pos = b["positions"]
        r = torch.linalg.vector_norm(pos[b["pair_i"]] - pos[b["pair_j"]], dim=-1)
        e_pair = self.net(torch.exp(-2.0 * (r[:, None] - self.centers) ** 2)).squeeze(-1)
        mol = b["atomic_subsystem_indices"][b["pair_i"]]
        n_mol = b["E"].shape[0]
        return {"per_molecule_energy": torch.zeros(n_mol).index_add(0, mol, e_pair)}


class CalculateProperties(nn.Module):
    def _get_energies(self, batch, model):
        return {"per_molecule_energy_true": batch["E"],
                "per_molecule_energy_predict": model(batch)["per_molecule_energy"].unsqueeze(1)}

    def _get_forces(self, batch, energies):
        e_pred = energies["per_molecule_energy_predict"]
        if not batch["positions"].requires_grad:
            batch["positions"].requires_grad = True
        grad = torch.autograd.grad(e_pred.sum(), batch["positions"], create_graph=False, retain_graph=True)[0]
        return {"per_atom_force_true": batch["F"], "per_atom_force_predict": -1 * grad}

    def forward(self, batch, model):
        energies = self._get_energies(batch, model)
        return {**energies, **self._get_forces(batch, energies)}


class PerMoleculeMeanSquaredError(nn.Module):
    def forward(self, pred, ref, batch):
        return torch.mean((pred - ref) ** 2 / batch["atomic_subsystem_counts"][:, None])


class FromPerAtomToPerMoleculeMeanSquaredError(nn.Module):
    def forward(self, pred, ref, batch):
        per_atom = ((pred - ref) ** 2).sum(-1, keepdim=True)
        per_mol = torch.zeros(batch["E"].shape[0], 1).scatter_add_(
            0, batch["atomic_subsystem_indices"].unsqueeze(1), per_atom)
        return torch.mean(per_mol / (3 * batch["atomic_subsystem_counts"][:, None]))


class Loss(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight
        self.loss = nn.ModuleDict({"per_molecule_energy": PerMoleculeMeanSquaredError(),
                                   "per_atom_force": FromPerAtomToPerMoleculeMeanSquaredError()})

    def forward(self, predict_target, batch):
        out, total = {}, torch.zeros(1)
        for prop, w in self.weight.items():
            l = self.loss[prop](predict_target[f"{prop}_predict"], predict_target[f"{prop}_true"], batch)
            total = total + w * l
            out[f"{prop}/mse"] = l
        out["total_loss"] = total
        return out


class TrainingAdapter(nn.Module):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.potential = PairPotential()
        self.calculate_predictions = CalculateProperties()
        self.loss = Loss({"per_molecule_energy": 1.0, "per_atom_force": 1.0})
        self.lr = lr

    def training_step(self, batch, batch_idx):
        loss_dict = self.loss(self.calculate_predictions(batch, self.potential), batch)
        return loss_dict

    def configure_optimizers(self):
        return torch.optim.AdamW(self.potential.parameters(), lr=self.lr)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = make_dataset(320, g)
    module = TrainingAdapter()
    optimizer = module.configure_optimizers()
    step = 0
    for epoch in range(4):
        order = torch.randperm(len(data), generator=g).tolist()
        for b in range(0, len(data), 16):
            batch = collate([data[k] for k in order[b:b + 16]])
            out = module.training_step(batch, b // 16)
            optimizer.zero_grad()
            out["total_loss"].sum().backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"step {step} loss {out['total_loss'].item():.4f} "
                      f"E {out['per_molecule_energy/mse'].item():.4f} F {out['per_atom_force/mse'].item():.4f}")
            step += 1


if __name__ == "__main__":
    main()
