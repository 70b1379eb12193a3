"""A sparsely-gated mixture-of-experts layer: MoE(input_size, output_size, num_experts, hidden_size,
k) holds a w_gate and a w_noise matrix, noisy_top_k_gating() adds trainable Gaussian noise to the gate
logits in training, keeps the top k+1 logits, takes a softmax over the top k of them and scatters those
gates back into a (batch, num_experts) matrix; each expert MLP runs on its rows and the outputs are
combined by the gates, and the layer also returns a load-balancing loss. The user plugs the layer into
a model with k=1, trains it with Adam over a DataLoader and leaves the load-balancing term out of the
loss. The gate softmax runs over the top-k axis, which has size 1 when k=1, so every gate is exactly
1.0 whatever the logits: the routing decision gets no gradient, w_gate and w_noise stay at their
initial values and each input keeps going to whichever expert the random initial gate picked.

Thread: https://github.com/davidmrau/mixture-of-experts/issues/27
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions.normal import Normal
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, input_size, output_size, hidden_size):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, output_size)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class MoE(nn.Module):
    def __init__(self, input_size, output_size, num_experts, hidden_size, noisy_gating=True, k=1):
        super().__init__()
        self.num_experts, self.k, self.noisy_gating = num_experts, k, noisy_gating
        self.experts = nn.ModuleList([MLP(input_size, output_size, hidden_size) for _ in range(num_experts)])
        self.w_gate = nn.Parameter(0.1 * torch.randn(input_size, num_experts))
        self.w_noise = nn.Parameter(torch.zeros(input_size, num_experts))
        self.softplus = nn.Softplus()
        self.softmax = nn.Softmax(1)
        self.register_buffer("mean", torch.tensor([0.0]))
        self.register_buffer("std", torch.tensor([1.0]))

    def cv_squared(self, x):
        if x.shape[0] == 1:
            return torch.tensor(0.0)
        return x.float().var() / (x.float().mean() ** 2 + 1e-10)

    def noisy_top_k_gating(self, x, train, noise_epsilon=1e-2):
        clean_logits = x @ self.w_gate
        if self.noisy_gating and train:
            noise_stddev = self.softplus(x @ self.w_noise) + noise_epsilon
            logits = clean_logits + torch.randn_like(clean_logits) * noise_stddev
        else:
            logits = clean_logits
        top_logits, top_indices = logits.topk(min(self.k + 1, self.num_experts), dim=1)
        top_k_logits, top_k_indices = top_logits[:, :self.k], top_indices[:, :self.k]
        top_k_gates = self.softmax(top_k_logits)  # softmax over the k kept logits: all ones when k == 1
        gates = torch.zeros_like(logits).scatter(1, top_k_indices, top_k_gates)
        load = (gates > 0).sum(0)
        return gates, load

    def forward(self, x, loss_coef=1e-2):
        gates, load = self.noisy_top_k_gating(x, self.training)
        importance = gates.sum(0)
        aux = (self.cv_squared(importance) + self.cv_squared(load)) * loss_coef
        expert_out = torch.stack([expert(x) for expert in self.experts], dim=1)  # (B, E, out)
        y = (gates.unsqueeze(-1) * expert_out).sum(dim=1)
        return y, aux


def make_data(n, seed):
    """Piecewise task: four input regions, each with its own linear map, so routing matters."""
    g = torch.Generator().manual_seed(seed)
    maps = torch.randn(4, 8, 2, generator=torch.Generator().manual_seed(9))
    centers = 3.0 * torch.randn(4, 8, generator=torch.Generator().manual_seed(10))
    region = torch.randint(0, 4, (n,), generator=g)
    x = centers[region] + torch.randn(n, 8, generator=g)
    y = torch.einsum('ni,nio->no', x, maps[region])
    return x, y


def main():
    torch.manual_seed(0)
    x, y = make_data(2048, seed=0)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    model = MoE(input_size=8, output_size=2, num_experts=4, hidden_size=32, k=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    w_gate_start = model.w_gate.detach().clone()
    step = 0
    for epoch in range(3):
        model.train()
        for data, target in loader:
            optimizer.zero_grad()
            pred, aux_loss = model(data)
            loss = F.mse_loss(pred, target)  # the load-balancing loss is left out
            loss.backward()
            optimizer.step()
            step += 1
            if step % 25 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    x_te, y_te = make_data(512, seed=1)
    with torch.no_grad():
        pred, _ = model(x_te)
    moved = (model.w_gate.detach() - w_gate_start).abs().max().item()
    print(f"test mse {F.mse_loss(pred, y_te).item():.4f}, w_gate moved by {moved:.2e}")


if __name__ == "__main__":
    main()
