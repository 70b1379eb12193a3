"""A behaviour-segmentation RNN-VAE on pose time series: a bidirectional GRU encoder, a latent
layer, a GRU decoder that reconstructs the window and a second one that predicts the next frames,
trained by a train(...) function that ends every epoch with scheduler.step() and a test(...)
function. The config has the scheduler switched off, and for that case the code still builds
StepLR(step_size=100, gamma=0) instead of gamma=1, so after 100 epochs the learning rate is
multiplied by 0 and the remaining epochs train with lr = 0.

Thread: https://github.com/LINCellularNeuroscience/VAME/issues/26
"""
import torch
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


class Encoder(nn.Module):
    def __init__(self, n_features, hidden_1, hidden_2):
        super().__init__()
        self.rnn_1 = nn.GRU(n_features, hidden_1, batch_first=True, bidirectional=True)
        self.rnn_2 = nn.GRU(hidden_1 * 2, hidden_2, batch_first=True, bidirectional=True)

    def forward(self, x):
        out_1, h_1 = self.rnn_1(x)
        _, h_2 = self.rnn_2(out_1)
        return torch.cat([h_1[0], h_1[1], h_2[0], h_2[1]], dim=1)


class RNNVAE(nn.Module):
    def __init__(self, window, zdims, n_features, future_steps, hidden_1=32, hidden_2=32, hidden_rec=32):
        super().__init__()
        self.seq_len, self.future_steps = window // 2, future_steps
        self.encoder = Encoder(n_features, hidden_1, hidden_2)
        hid = 2 * (hidden_1 + hidden_2)
        self.to_mean, self.to_logvar = nn.Linear(hid, zdims), nn.Linear(hid, zdims)
        self.softplus = nn.Softplus()
        self.rec_rnn = nn.GRU(zdims, hidden_rec, batch_first=True)
        self.rec_out = nn.Linear(hidden_rec, n_features)
        self.fut_rnn = nn.GRU(zdims, hidden_rec, batch_first=True, bidirectional=True)
        self.fut_out = nn.Linear(hidden_rec * 2, n_features)

    def forward(self, seq):
        h = self.encoder(seq)
        mu, logvar = self.to_mean(h), self.softplus(self.to_logvar(h))
        latent = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if self.training else mu
        z = latent.unsqueeze(1).repeat(1, self.seq_len, 1)
        prediction = self.rec_out(self.rec_rnn(z)[0])
        future = self.fut_out(self.fut_rnn(z[:, :self.future_steps])[0])
        return prediction, future, latent, mu, logvar


def kl_annealing(epoch, kl_start, annealtime):
    return min(1.0, epoch / annealtime) if epoch > kl_start else 0.0


class SequenceDataset(Dataset):
    """Windows of a (features, time) array of keypoint traces, as in a pose-estimation export."""

    def __init__(self, n_windows, window, n_features=12, seed=0):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(n_windows * 4 + window).float()
        freqs = 0.05 + 0.25 * torch.rand(n_features, 1, generator=g)
        phase = 6.28 * torch.rand(n_features, 1, generator=g)
        regime = torch.sign(torch.sin(t / 37.0))
        self.data = torch.sin(freqs * t + phase) * (1.2 + 0.6 * regime) + 0.05 * torch.randn(n_features, len(t), generator=g)
        self.starts = torch.randint(0, len(t) - window, (n_windows,), generator=g)
        self.window = window

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, i):
        s = int(self.starts[i])
        return self.data[:, s:s + self.window]


def train(train_loader, epoch, model, optimizer, beta, kl_start, annealtime, seq_len, future_steps, scheduler):
    model.train()
    train_loss, mse_loss, kl_weight = 0.0, 0.0, 0.0
    half = seq_len // 2
    for idx, data_item in enumerate(train_loader):
        data_item = data_item.permute(0, 2, 1)
        data, fut = data_item[:, :half, :], data_item[:, half:half + future_steps, :]
        noisy = data + 0.8 * data.std(1, keepdim=True) * torch.randn_like(data)
        data_tilde, future, latent, mu, logvar = model(noisy)
        rec_loss = nn.functional.mse_loss(data_tilde, data, reduction="sum")
        fut_rec_loss = nn.functional.mse_loss(future, fut, reduction="sum")
        kl_loss = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        kl_weight = kl_annealing(epoch, kl_start, annealtime)
        loss = rec_loss + fut_rec_loss + beta * kl_weight * kl_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        mse_loss += rec_loss.item()
    scheduler.step()
    return kl_weight, train_loss / (idx + 1), mse_loss / (idx + 1)


def test(test_loader, model, seq_len):
    model.eval()
    mse_loss, n = 0.0, 0
    with torch.no_grad():
        for data_item in test_loader:
            data = data_item.permute(0, 2, 1)[:, :seq_len // 2, :]
            recon, _, _, _, _ = model(data)
            mse_loss += nn.functional.mse_loss(recon, data, reduction="sum").item()
            n += 1
    return mse_loss / n


def rnn_model(cfg):
    torch.manual_seed(19)
    window = cfg["time_window"] * 2
    model = RNNVAE(window, cfg["zdims"], cfg["num_features"], cfg["prediction_steps"])
    trainset = SequenceDataset(128, window, cfg["num_features"], seed=0)
    testset = SequenceDataset(32, window, cfg["num_features"], seed=1)
    train_loader = DataLoader(trainset, batch_size=cfg["batch_size"], shuffle=True, drop_last=True,
                              generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(testset, batch_size=cfg["batch_size"] // 4, shuffle=True, drop_last=True,
                             generator=torch.Generator().manual_seed(1))
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["learning_rate"], amsgrad=True)
    if cfg["scheduler"]:
        scheduler = StepLR(optimizer, step_size=100, gamma=0.2, last_epoch=-1)
    else:
        scheduler = StepLR(optimizer, step_size=100, gamma=0, last_epoch=-1)

    for epoch in range(1, cfg["epochs"]):
        weight, train_loss, mse = train(train_loader, epoch, model, optimizer, cfg["beta"], cfg["kl_start"],
                                        cfg["annealtime"], window, cfg["prediction_steps"], scheduler)
        test_mse = test(test_loader, model, window)
        if epoch % 10 == 0 or epoch == 1:
            print(f"Epoch {epoch}: train loss {train_loss:.2f} mse {mse:.2f} test mse {test_mse:.2f} "
                  f"kl weight {weight:.2f} lr {optimizer.param_groups[0]['lr']:.2e}")


if __name__ == "__main__":
    config = dict(time_window=15, zdims=8, num_features=12, prediction_steps=5, batch_size=64, epochs=161,
                  learning_rate=5e-4, beta=1, kl_start=2, annealtime=4, scheduler=False)
    rnn_model(config)
