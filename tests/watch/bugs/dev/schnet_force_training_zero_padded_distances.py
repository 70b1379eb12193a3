"""A SchNet-style interatomic potential trained on energies and forces. Molecules of different sizes are
zero-padded to a common atom count, and every padded neighbour slot holds index 0. The distance
layer takes the norm of the position differences (written out as the square root of the summed
squares) over every neighbour slot; the neighbour mask is applied only later, to the filters. For
atom 0 the padded slots point at itself, so those distances are exactly 0. The energy is still
finite, but the forces are -dE/dR taken with create_graph=True, and the derivative of the square
root at 0 turns into NaN: the force loss is NaN, the backward pass writes NaN into every gradient
and Adam then fills the weights with NaN. Training keeps running and logs NaN.

Thread: https://github.com/atomistic-machine-learning/schnetpack/pull/6
"""
import torch
import torch.nn.functional as F
from torch import nn

N_MAX = 6


def atom_distances(positions, neighbors):
    b = torch.arange(positions.shape[0])[:, None, None]
    diff = positions[b, neighbors] - positions[:, :, None, :]
    return torch.sqrt((diff ** 2).sum(-1))


class GaussianExpansion(nn.Module):
    def __init__(self, stop=5.0, n=20):
        super().__init__()
        self.register_buffer("centers", torch.linspace(0.0, stop, n))
        self.width = (stop / n) ** 2

    def forward(self, r):
        return torch.exp(-((r[..., None] - self.centers) ** 2) / (2 * self.width))


class Interaction(nn.Module):
    def __init__(self, dim, n_rbf):
        super().__init__()
        self.filter = nn.Sequential(nn.Linear(n_rbf, dim), nn.Softplus(), nn.Linear(dim, dim))
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.Softplus(), nn.Linear(dim, dim))

    def forward(self, x, f_ij, neighbors, nbh_mask):
        b = torch.arange(x.shape[0])[:, None, None]
        w = self.filter(f_ij) * nbh_mask[..., None]
        return x + self.out((x[b, neighbors] * w).sum(2))


class SchNetLike(nn.Module):
    def __init__(self, dim=32, n_rbf=20):
        super().__init__()
        self.embedding = nn.Embedding(10, dim, padding_idx=0)
        self.expansion = GaussianExpansion(n=n_rbf)
        self.interactions = nn.ModuleList([Interaction(dim, n_rbf) for _ in range(2)])
        self.atomwise = nn.Sequential(nn.Linear(dim, dim // 2), nn.Softplus(), nn.Linear(dim // 2, 1))

    def forward(self, batch):
        pos = batch["positions"]
        r_ij = atom_distances(pos, batch["neighbors"])
        f_ij = self.expansion(r_ij)
        x = self.embedding(batch["Z"])
        for block in self.interactions:
            x = block(x, f_ij, batch["neighbors"], batch["nbh_mask"])
        energy = (self.atomwise(x).squeeze(-1) * batch["atom_mask"]).sum(1, keepdim=True)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
        return {"y": energy, "dydx": forces}


def reference(pos, mask):
    # Morse-like pair energy on the real atoms only, forces from its analytic gradient
    pos = pos.clone().requires_grad_(True)
    d2 = ((pos[:, :, None] - pos[:, None]) ** 2).sum(-1)
    pair = mask[:, :, None] * mask[:, None, :] * (1 - torch.eye(pos.shape[1]))
    r = torch.sqrt(torch.where(pair > 0, d2, torch.ones_like(d2)))
    e = 0.5 * (pair * (1 - torch.exp(-1.2 * (r - 1.5))) ** 2).sum((1, 2))
    f = -torch.autograd.grad(e.sum(), pos)[0]
    return e[:, None].detach(), f


def make_batch(bs, g):
    n_atoms = torch.randint(3, N_MAX + 1, (bs,), generator=g)
    atom_mask = (torch.arange(N_MAX)[None] < n_atoms[:, None]).float()
    pos = (torch.randn(bs, N_MAX, 3, generator=g) * 1.2) * atom_mask[..., None]
    Z = torch.randint(1, 4, (bs, N_MAX), generator=g) * atom_mask.long()
    others = torch.stack([torch.cat([torch.arange(i), torch.arange(i + 1, N_MAX)]) for i in range(N_MAX)])
    nbh_mask = atom_mask[:, :, None] * atom_mask[:, others]
    neighbors = others[None].repeat(bs, 1, 1) * nbh_mask.long()  # padded slots hold index 0
    energy, forces = reference(pos, atom_mask)
    return {"positions": pos.requires_grad_(True), "Z": Z, "atom_mask": atom_mask, "neighbors": neighbors,
            "nbh_mask": nbh_mask, "energy": energy, "forces": forces}


def loss_fn(batch, result):
    n = batch["atom_mask"].sum(1, keepdim=True)
    err_e = (result["y"] / n - batch["energy"] / n) ** 2
    err_f = ((result["dydx"] - batch["forces"]) ** 2).sum(2).sum(1, keepdim=True) / (3 * n)
    return (err_e + err_f).sum()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = SchNetLike()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(80):
        batch = make_batch(16, g)
        result = model(batch)
        loss = loss_fn(batch, result)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
