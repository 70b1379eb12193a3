"""A long-horizon forecaster in the Informer / Autoformer experiment layout: one Dataset class per
split flag ('train' / 'val' / 'test') cuts 70 / 10 / 20 percent of a multivariate series by time
(each later split starting seq_len rows early, for its first input window), scales it with a
StandardScaler, and serves (seq_len input, pred_len target) windows; an Exp class builds the three
loaders through _get_data(flag), trains a linear decomposition model with Adam and MSELoss and
validates each epoch. The scaler is fitted on the training rows only (border1s[0]:border2s[0]), as
the reference code does, and applied unchanged to every split: the later periods of a growing load
sit above the training range, as they will at prediction time."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class StandardScaler:
    def fit(self, data):
        self.mean, self.std = data.mean(0), data.std(0)

    def transform(self, data):
        return (data - self.mean) / self.std


def load_series(rows=2400, columns=7, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(rows)[:, None]
    season = 3.0 * np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6.3, (1, columns)))
    trend = 0.006 * t * rng.uniform(0.5, 1.5, (1, columns))
    return (20.0 + season + trend + rng.normal(0, 0.8, (rows, columns))).astype(np.float32)


class Dataset_Custom(Dataset):
    def __init__(self, raw, flag="train", size=(96, 24), scale=True):
        self.seq_len, self.pred_len = size
        n = len(raw)
        num_train, num_test = int(n * 0.7), int(n * 0.2)
        num_vali = n - num_train - num_test
        border1s = [0, num_train - self.seq_len, n - num_test - self.seq_len]
        border2s = [num_train, num_train + num_vali, n]
        i = {"train": 0, "val": 1, "test": 2}[flag]
        self.scaler = StandardScaler()
        data = raw
        if scale:
            self.scaler.fit(raw[border1s[0]:border2s[0]])
            data = self.scaler.transform(raw)
        self.data_x = torch.from_numpy(data[border1s[i]:border2s[i]])

    def __getitem__(self, index):
        end = index + self.seq_len
        return self.data_x[index:end], self.data_x[end:end + self.pred_len]

    def __len__(self):
        return len(self.data_x) - self.seq_len - self.pred_len + 1


class DLinear(nn.Module):
    def __init__(self, seq_len, pred_len, kernel=25):
        super().__init__()
        self.avg = nn.AvgPool1d(kernel, stride=1, padding=kernel // 2, count_include_pad=False)
        self.seasonal = nn.Linear(seq_len, pred_len)
        self.trend = nn.Linear(seq_len, pred_len)

    def forward(self, x):                       # x: (B, L, C)
        trend = self.avg(x.permute(0, 2, 1))
        seasonal = x.permute(0, 2, 1) - trend
        return (self.seasonal(seasonal) + self.trend(trend)).permute(0, 2, 1)


class Exp_Main:
    def __init__(self, raw, epochs=2):
        self.raw, self.epochs = raw, epochs
        self.model = DLinear(96, 24)

    def _get_data(self, flag):
        data_set = Dataset_Custom(self.raw, flag=flag)
        shuffle = flag == "train"
        return data_set, DataLoader(data_set, batch_size=32, shuffle=shuffle, drop_last=shuffle,
                                    generator=torch.Generator().manual_seed(0))

    def vali(self, loader, criterion):
        self.model.eval()
        with torch.no_grad():
            losses = [criterion(self.model(x), y).item() for x, y in loader]
        self.model.train()
        return float(np.mean(losses))

    def train(self):
        _, train_loader = self._get_data("train")
        _, vali_loader = self._get_data("val")
        _, test_loader = self._get_data("test")
        optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        criterion = nn.MSELoss()
        for epoch in range(self.epochs):
            self.model.train()
            for x, y in train_loader:
                optimizer.zero_grad()
                loss = criterion(self.model(x), y)
                loss.backward()
                optimizer.step()
            print(f"epoch {epoch}: vali {self.vali(vali_loader, criterion):.4f} "
                  f"test {self.vali(test_loader, criterion):.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    Exp_Main(load_series()).train()
