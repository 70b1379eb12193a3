"""A small neural force field for clusters of 5 atoms: an MLP maps sorted pair distances to an
energy. A ForceFieldTrainer fits energies and forces with one Adam optimizer, forces taken as
-dE/dpositions by a compute_forces() helper. The helper calls torch.autograd.grad without
create_graph=True, so the predicted forces are constants to autograd: the force term of the loss
adds a number and no gradient, and the model only ever learns the energies."""
import torch
import torch.nn.functional as F
from torch import nn

ATOMS = 5


def pair_distances(positions):
    i, j = torch.triu_indices(ATOMS, ATOMS, 1)
    return torch.linalg.vector_norm(positions[:, i] - positions[:, j], dim=-1)


def reference_energy(positions):
    d = pair_distances(positions)
    return ((1.0 / d) ** 12 - 2 * (1.0 / d) ** 6).sum(dim=1) * 0.1


class EnergyModel(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(ATOMS * (ATOMS - 1) // 2, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, positions):
        return self.net(torch.sort(pair_distances(positions), dim=1).values).squeeze(-1)


def compute_forces(model, positions):
    positions = positions.clone().requires_grad_(True)
    energy = model(positions)
    forces = -torch.autograd.grad(energy.sum(), positions, retain_graph=True)[0]
    return energy, forces


class ForceFieldTrainer:
    def __init__(self, model, force_weight=10.0):
        self.model, self.force_weight = model, force_weight
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(self, positions, energies, forces):
        pred_energy, pred_forces = compute_forces(self.model, positions)
        loss = F.mse_loss(pred_energy, energies) + self.force_weight * F.mse_loss(pred_forces, forces)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def make_data(n, generator):
    positions = torch.randn(n, ATOMS, 3, generator=generator) * 0.4 + torch.arange(ATOMS).view(1, -1, 1) * 1.1
    positions = positions.requires_grad_(True)
    energies = reference_energy(positions)
    forces = -torch.autograd.grad(energies.sum(), positions)[0]
    return positions.detach(), energies.detach(), forces


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    positions, energies, forces = make_data(1024, g)
    trainer = ForceFieldTrainer(EnergyModel())
    for step in range(80):
        idx = torch.randint(0, len(positions), (32,), generator=g)
        loss = trainer.step(positions[idx], energies[idx], forces[idx])
        if step % 20 == 0:
            print(f"step {step} loss {loss:.4f}")


if __name__ == "__main__":
    main()
