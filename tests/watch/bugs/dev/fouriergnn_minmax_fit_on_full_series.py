"""A multivariate load/solar forecaster in the FourierGNN layout: one Dataset class per split flag
('train' / 'val' / 'test') loads the whole (time, nodes) array, min-max scales it, then cuts the
70 / 20 / 10 percent time ranges and serves (seq_len window, next pre_len steps) pairs; a small
Fourier graph network (token embedding of every node-time value, rFFT over the flattened
hypervariate graph, complex-weight mixing, inverse FFT, MLP head) is trained with RMSprop, MSELoss
and an ExponentialLR stepped every few epochs, with validate() each epoch and test() at the end.
The scaler is fitted on the full series before the split (fit_transform on all rows), so the
minimum and maximum of the validation and test periods (here a growing demand level) shape the
training inputs and targets, and the reported validation and test errors are measured on data
whose statistics leaked into training.

Thread: https://github.com/aikunyi/FourierGNN/pull/11
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def make_load_series(length, nodes, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(length)[:, None]
    level = 50.0 + 0.04 * t * (1.0 + 0.1 * np.arange(nodes)[None, :])
    daily = 8.0 * np.sin(2 * np.pi * t / 24.0 + rng.uniform(0, 6.28, size=(1, nodes)))
    noise = rng.normal(0.0, 1.5, size=(length, nodes))
    return (level + daily + noise).astype(np.float32)


def min_max_fit_transform(data):
    lo, hi = data.min(axis=0, keepdims=True), data.max(axis=0, keepdims=True)
    return (data - lo) / (hi - lo)


class Dataset_Load(Dataset):
    def __init__(self, raw, flag, seq_len, pre_len, train_ratio, val_ratio):
        assert flag in ("train", "val", "test")
        self.flag, self.seq_len, self.pre_len = flag, seq_len, pre_len
        data = min_max_fit_transform(raw)
        n = len(data)
        if flag == "train":
            begin, end = 0, int(n * train_ratio)
        elif flag == "val":
            begin, end = int(n * train_ratio), int(n * (train_ratio + val_ratio))
        else:
            begin, end = int(n * (train_ratio + val_ratio)), n
        self.data = torch.from_numpy(data[begin:end])

    def __getitem__(self, index):
        end = index + self.seq_len
        return self.data[index:end], self.data[end:end + self.pre_len]

    def __len__(self):
        return len(self.data) - self.seq_len - self.pre_len


class FourierGraphNet(nn.Module):
    def __init__(self, pre_length, embed_size, feature_size, seq_length, hidden_size):
        super().__init__()
        self.embed_size, self.pre_length = embed_size, pre_length
        self.embeddings = nn.Parameter(torch.randn(1, embed_size))
        self.w = nn.Parameter(0.02 * torch.randn(2, embed_size, embed_size))
        self.b = nn.Parameter(0.02 * torch.randn(2, embed_size))
        self.time_proj = nn.Parameter(torch.randn(seq_length, 8) * 0.1)
        self.fc = nn.Sequential(nn.Linear(embed_size * 8, 64), nn.LeakyReLU(),
                                nn.Linear(64, hidden_size), nn.LeakyReLU(),
                                nn.Linear(hidden_size, pre_length))

    def forward(self, x):
        x = x.permute(0, 2, 1).contiguous()           # B, N, L
        B, N, L = x.shape
        x = x.reshape(B, -1).unsqueeze(2) * self.embeddings      # B, N*L, D
        spec = torch.fft.rfft(x, dim=1, norm="ortho")
        real = torch.relu(spec.real @ self.w[0] - spec.imag @ self.w[1] + self.b[0])
        imag = torch.relu(spec.imag @ self.w[0] + spec.real @ self.w[1] + self.b[1])
        mixed = torch.complex(real, imag) + spec
        x = torch.fft.irfft(mixed, n=N * L, dim=1, norm="ortho")
        x = x.reshape(B, N, L, self.embed_size).permute(0, 1, 3, 2)   # B, N, D, L
        x = (x @ self.time_proj).reshape(B, N, -1)
        return self.fc(x)                              # B, N, pre_length


def validate(model, loader, criterion):
    model.eval()
    total, cnt = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y.permute(0, 2, 1)).item()
            cnt += 1
    model.train()
    return total / cnt


def main():
    torch.manual_seed(0)
    args = dict(seq_length=12, pre_length=6, embed_size=16, hidden_size=32, batch_size=32,
                train_epochs=6, learning_rate=1e-3, exponential_decay_step=2, decay_rate=0.5,
                train_ratio=0.7, val_ratio=0.2)
    raw = make_load_series(1200, 8, seed=0)
    sets = {flag: Dataset_Load(raw, flag, args["seq_length"], args["pre_length"], args["train_ratio"],
                               args["val_ratio"]) for flag in ("train", "val", "test")}
    train_loader = DataLoader(sets["train"], batch_size=args["batch_size"], shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(sets["val"], batch_size=args["batch_size"], shuffle=False)
    test_loader = DataLoader(sets["test"], batch_size=args["batch_size"], shuffle=False)

    model = FourierGraphNet(args["pre_length"], args["embed_size"], raw.shape[1], args["seq_length"],
                            args["hidden_size"])
    optim = torch.optim.RMSprop(model.parameters(), lr=args["learning_rate"], eps=1e-8)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optim, gamma=args["decay_rate"])
    forecast_loss = nn.MSELoss(reduction="mean")

    for epoch in range(args["train_epochs"]):
        model.train()
        loss_total, cnt = 0.0, 0
        for x, y in train_loader:
            optim.zero_grad()
            forecast = model(x)
            loss = forecast_loss(forecast, y.permute(0, 2, 1).contiguous())
            loss.backward()
            optim.step()
            loss_total += loss.item()
            cnt += 1
        if (epoch + 1) % args["exponential_decay_step"] == 0:
            scheduler.step()
        val_loss = validate(model, val_loader, forecast_loss)
        print(f"| end of epoch {epoch:3d} | train_total_loss {loss_total / cnt:.5f} | val_loss {val_loss:.5f}")
    print(f"test loss {validate(model, test_loader, forecast_loss):.5f}")


if __name__ == "__main__":
    main()
