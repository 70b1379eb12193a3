"""Healthy look-alike of data-leakage: DEC-style deep clustering. An autoencoder is pretrained to
reconstruct its input, then its encoder is refined with a KL loss towards a sharpened target
distribution computed, under no_grad, from the soft assignments of every row; the cluster accuracy
is measured on the same rows after each epoch. No labels are learned, so scoring the rows it was
trained on is how such a method is evaluated, not a leak."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

K, DIM = 4, 16


def soft_assign(z, centers, alpha=1.0):
    q = (1.0 + torch.cdist(z, centers) ** 2 / alpha) ** (-(alpha + 1) / 2)
    return q / q.sum(1, keepdim=True)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    means = 3 * torch.randn(K, DIM, generator=g)
    y = torch.randint(0, K, (768,), generator=g)
    x = means[y] + torch.randn(768, DIM, generator=g)
    loader = DataLoader(TensorDataset(x), batch_size=64, shuffle=True)
    eval_loader = DataLoader(TensorDataset(x), batch_size=256)
    encoder = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, 4))
    decoder = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, DIM))
    opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=3e-3)
    for epoch in range(2):                                   # pretraining: reconstruction
        for (xb,) in loader:
            loss = F.mse_loss(decoder(encoder(xb)), xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        z = torch.cat([encoder(xb) for (xb,) in eval_loader])
    centers = nn.Parameter(z[torch.randperm(len(z), generator=g)[:K]].clone())
    opt = torch.optim.SGD(list(encoder.parameters()) + [centers], lr=0.01, momentum=0.9)
    for epoch in range(3):                                   # clustering: KL to the target distribution
        with torch.no_grad():
            q_all = torch.cat([soft_assign(encoder(xb), centers) for (xb,) in eval_loader])
            p_all = q_all ** 2 / q_all.sum(0)
            p_all = p_all / p_all.sum(1, keepdim=True)
        for i in range(0, len(x), 64):
            q = soft_assign(encoder(x[i:i + 64]), centers)
            loss = F.kl_div(q.log(), p_all[i:i + 64], reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()
        pred = q_all.argmax(1)
        purity = sum(torch.bincount(y[pred == c], minlength=K).max().item() for c in range(K) if (pred == c).any())
        print(f"epoch {epoch} cluster purity {purity / len(y):.3f}")


if __name__ == "__main__":
    main()
