"""A tutorial-style ANI force-training script at module level: radial atomic environment vectors
(AEVs) computed from the coordinates, one small network per element summed to a molecular energy,
Adam, ReduceLROnPlateau stepped once per epoch on a validate() energy RMSE, and batches that arrive as
chunks of molecules with the same atom count. In the training loop the chunk coordinates are set to
require grad and the forces are taken as -torch.autograd.grad(energies.sum(), coordinates,
retain_graph=True): without create_graph=True the predicted forces have no graph to the network
weights, so the force loss (force_coefficient 1) is added to the total but sends no gradient. The
network is fitted to the energies only and the force error does not come down.

Thread: https://github.com/aiqm/torchani/pull/238
"""
import math

import torch

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
ETA, SHIFTS, RC = 4.0, torch.linspace(0.8, 3.5, 12), 4.0
N_SPECIES = 2


def aev(species, coordinates):
    n = coordinates.shape[1]
    i, j = torch.triu_indices(n, n, 1)
    d = torch.linalg.vector_norm(coordinates[:, i] - coordinates[:, j], dim=-1)
    fc = 0.5 * torch.cos(math.pi * d.clamp(max=RC) / RC) + 0.5
    terms = torch.exp(-ETA * (d[..., None] - SHIFTS) ** 2) * fc[..., None]
    out = torch.zeros(coordinates.shape[0], n, N_SPECIES, len(SHIFTS))
    out.index_add_(1, i, terms[:, :, None, :] * torch.nn.functional.one_hot(species[:, j], N_SPECIES)[..., None])
    out.index_add_(1, j, terms[:, :, None, :] * torch.nn.functional.one_hot(species[:, i], N_SPECIES)[..., None])
    return out.flatten(2)


class ANIModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        d = N_SPECIES * len(SHIFTS)
        self.nets = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(d, 32), torch.nn.CELU(0.1),
                                                             torch.nn.Linear(32, 16), torch.nn.CELU(0.1),
                                                             torch.nn.Linear(16, 1)) for _ in range(N_SPECIES)])

    def forward(self, species_coordinates):
        species, coordinates = species_coordinates
        a = aev(species, coordinates)
        atomic = torch.zeros(species.shape)
        for s, net in enumerate(self.nets):
            mask = species == s
            atomic = atomic.masked_scatter(mask, net(a[mask]).squeeze(-1))
        return species, atomic.sum(1)


def reference(species, coordinates):
    c = coordinates.clone().requires_grad_(True)
    n = c.shape[1]
    i, j = torch.triu_indices(n, n, 1)
    d = torch.linalg.vector_norm(c[:, i] - c[:, j], dim=-1)
    depth = 1.0 + 0.5 * (species[:, i] + species[:, j])
    e = 0.02 * (depth * (1 - torch.exp(-1.5 * (d - 1.3))) ** 2).sum(1)  # hartree-like scale
    return e.detach(), -torch.autograd.grad(e.sum(), c)[0]


def make_batches(n_batches):
    batches = []
    for _ in range(n_batches):
        energies, atomic = [], []
        for n_atoms in (4, 6):
            species = torch.randint(0, N_SPECIES, (8, n_atoms), generator=g)
            coordinates = torch.randn(8, n_atoms, 3, generator=g) * 1.2
            e, f = reference(species, coordinates)
            energies.append(e)
            atomic.append({"species": species, "coordinates": coordinates, "forces": f})
        batches.append((None, {"energies": torch.cat(energies), "atomic": atomic}))
    return batches


training, validation = make_batches(20), make_batches(4)
nn = ANIModel()
model = nn
optimizer = torch.optim.Adam(nn.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=100)
mse = torch.nn.MSELoss(reduction="none")


def validate():
    total_mse, count = 0.0, 0
    with torch.no_grad():
        for _, batch_y in validation:
            pred = torch.cat([model((c["species"], c["coordinates"]))[1] for c in batch_y["atomic"]])
            total_mse += ((pred - batch_y["energies"]) ** 2).sum().item()
            count += pred.shape[0]
    return math.sqrt(total_mse / count)


max_epochs = 4
force_coefficient = 1
for epoch in range(max_epochs):
    rmse = validate()
    print("RMSE:", round(rmse, 4), "at epoch", epoch)
    scheduler.step(rmse)
    for i, (_, batch_y) in enumerate(training):
        true_energies = batch_y["energies"]
        predicted_energies, num_atoms, force_loss = [], [], []
        for chunk in batch_y["atomic"]:
            chunk_species = chunk["species"]
            chunk_coordinates = chunk["coordinates"]
            chunk_num_atoms = (chunk_species >= 0).sum(dim=1).to(true_energies.dtype)
            num_atoms.append(chunk_num_atoms)
            chunk_coordinates.requires_grad_(True)
            _, chunk_energies = model((chunk_species, chunk_coordinates))
            chunk_forces = -torch.autograd.grad(chunk_energies.sum(), chunk_coordinates, retain_graph=True)[0]
            chunk_force_loss = mse(chunk["forces"], chunk_forces).sum(dim=(1, 2)) / chunk_num_atoms
            predicted_energies.append(chunk_energies)
            force_loss.append(chunk_force_loss)
        num_atoms = torch.cat(num_atoms)
        predicted_energies = torch.cat(predicted_energies)
        energy_loss = (mse(predicted_energies, true_energies) / num_atoms).mean()
        energy_loss = 0.5 * (torch.exp(2 * energy_loss) - 1)
        force_loss = torch.cat(force_loss).mean()
        loss = energy_loss + force_coefficient * force_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 10 == 0:
            print(f"epoch {epoch} batch {i} energy_loss {energy_loss.item():.4f} force_loss {force_loss.item():.4f}")
print("final RMSE:", round(validate(), 4))
