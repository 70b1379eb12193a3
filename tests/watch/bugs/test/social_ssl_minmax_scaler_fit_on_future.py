"""A Social-SSL-style trajectory pipeline: a dataset converter cuts each scene file into
windows of 8 observed and 12 future positions (create_dataset), then a scale step fits a
per-scene min-max scaler and rescales both arrays to [0, 1], keeping scale and minimum to
undo it for evaluation; a small LSTM encoder-decoder is trained on the merged scaled windows
with Adam and an MSE loss, and ADE / FDE on a held-out scene are reported after denormalising.
The scaler of every scene, the held-out test scene included, is fitted on the observed AND the
future windows, so the normalisation of the inputs is built from the positions to be predicted
(how far the walkers get by the end of the clip); the test ADE / FDE use information a
forecaster would not have.

Thread: https://github.com/Sigta678/Social-SSL/issues/2
"""
import numpy as np
import torch
from torch import nn

N_PAST, N_NEXT = 8, 12


class MinMaxScaler2D:
    def fit(self, xy):
        self.data_min_ = xy.min(axis=0)
        self.scale_ = 1.0 / (xy.max(axis=0) - self.data_min_)
        return self

    def transform(self, xy):
        return (xy - self.data_min_) * self.scale_

    def inverse_transform(self, xy):
        return xy / self.scale_ + self.data_min_


def scene_file(seed, n_peds=40, length=60):
    rng = np.random.default_rng(seed)
    extent = rng.uniform(8, 20)
    p_data = []
    for _ in range(n_peds):
        pos = rng.uniform(0, extent, 2)
        vel = rng.normal(0, 0.35, 2)
        track = []
        for _ in range(length):
            track.append(pos.copy())
            vel = 0.95 * vel + rng.normal(0, 0.05, 2)
            pos = pos + vel
        p_data.append(np.array(track, dtype=np.float32))
    return p_data


def create_dataset(p_data, stride=4):
    obsv, pred = [], []
    for track in p_data:
        for t0 in range(N_PAST, len(track) - N_NEXT + 1, stride):
            obsv.append(track[t0 - N_PAST:t0])
            pred.append(track[t0:t0 + N_NEXT])
    return np.stack(obsv), np.stack(pred)


def scale_scene(obsv, pred):
    scaler = MinMaxScaler2D().fit(np.concatenate([obsv.reshape(-1, 2), pred.reshape(-1, 2)]))
    obsv = scaler.transform(obsv.reshape(-1, 2)).reshape(-1, N_PAST, 2)
    pred = scaler.transform(pred.reshape(-1, 2)).reshape(-1, N_NEXT, 2)
    return obsv.astype(np.float32), pred.astype(np.float32), scaler


class EncDec(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.enc = nn.LSTM(2, hidden, batch_first=True)
        self.head = nn.Linear(hidden, N_NEXT * 2)

    def forward(self, obsv):
        _, (h, _) = self.enc(obsv)
        return obsv[:, -1:, :] + self.head(h[-1]).view(-1, N_NEXT, 2)


def main():
    torch.manual_seed(0)
    train_obsv, train_pred = [], []
    for seed in range(4):
        o, p, _ = scale_scene(*create_dataset(scene_file(seed)))
        train_obsv.append(o)
        train_pred.append(p)
    obsv = torch.tensor(np.concatenate(train_obsv))
    pred = torch.tensor(np.concatenate(train_pred))
    test_o, test_p, test_scaler = scale_scene(*create_dataset(scene_file(100)))
    test_o_t = torch.tensor(test_o)
    test_p_abs = test_scaler.inverse_transform(test_p.reshape(-1, 2)).reshape(-1, N_NEXT, 2)

    model = EncDec()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.MSELoss()
    bs = 64
    for epoch in range(4):
        model.train()
        perm = torch.randperm(len(obsv))
        for b in range(0, len(perm), bs):
            idx = perm[b:b + bs]
            optimizer.zero_grad()
            loss = criterion(model(obsv[idx]), pred[idx])
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            out = model(test_o_t).numpy()
        out_abs = test_scaler.inverse_transform(out.reshape(-1, 2)).reshape(-1, N_NEXT, 2)
        err = np.linalg.norm(out_abs - test_p_abs, axis=-1)
        print(f"epoch {epoch} loss {loss.item():.5f} test ADE {err.mean():.3f} FDE {err[:, -1].mean():.3f}")


if __name__ == "__main__":
    main()
