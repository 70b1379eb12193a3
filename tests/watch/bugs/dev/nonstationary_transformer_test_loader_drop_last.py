"""A long-term forecasting experiment in the Autoformer / Non-stationary Transformer code layout:
data_provider(args, flag) builds a windowed Dataset_Custom for 'train', 'val' or 'test' and wraps
it in a DataLoader whose drop_last is True for every flag, the test flag included; an Exp_Main
class trains a de-stationarized Transformer (each input window is normalized by its own mean and
standard deviation, and the output is de-normalized with them) with Adam and MSELoss, checks
vali() every epoch and finally runs test(), which concatenates the predictions of the test loader
and reports MSE and MAE. With 158 test windows and batch_size 32 the last 30 windows never
reach the metric, so the reported test numbers describe a subset that depends on the batch size,
and they are better than the full test set would give.

Thread: https://github.com/thuml/Nonstationary_Transformers/issues/26
"""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def make_series(n, n_vars, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n, dtype=torch.float32)[:, None]
    season = (1.0 + t / n) * torch.sin(2 * math.pi * t / 52 + torch.rand(1, n_vars, generator=g) * 6)
    return 2.0 + 0.01 * t + season + 0.2 * torch.randn(n, n_vars, generator=g)


class Dataset_Custom(Dataset):
    def __init__(self, data, seq_len, pred_len):
        self.data, self.seq_len, self.pred_len = data, seq_len, pred_len

    def __len__(self):
        return len(self.data) - self.seq_len - self.pred_len + 1

    def __getitem__(self, i):
        s = i + self.seq_len
        return self.data[i:s], self.data[s:s + self.pred_len]


def data_provider(args, flag, data):
    shuffle_flag = flag == "train"
    drop_last = True
    data_set = Dataset_Custom(data, args["seq_len"], args["pred_len"])
    print(flag, len(data_set))
    loader = DataLoader(data_set, batch_size=args["batch_size"], shuffle=shuffle_flag, drop_last=drop_last,
                        generator=torch.Generator().manual_seed(0))
    return data_set, loader


class NSTransformer(nn.Module):
    def __init__(self, n_vars, seq_len, pred_len, d_model=32):
        super().__init__()
        self.embed = nn.Linear(n_vars, d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(seq_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, 4, 64, dropout=0.05, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(seq_len * d_model, pred_len * n_vars)
        self.pred_len, self.n_vars = pred_len, n_vars

    def forward(self, x_enc):
        mean = x_enc.mean(1, keepdim=True).detach()
        std = torch.sqrt(x_enc.var(1, keepdim=True, unbiased=False) + 1e-5).detach()
        h = self.encoder(self.embed((x_enc - mean) / std) + self.pos)
        out = self.head(h.flatten(1)).view(-1, self.pred_len, self.n_vars)
        return out * std + mean


class Exp_Main:
    def __init__(self, args, splits):
        self.args, self.splits = args, splits
        self.model = NSTransformer(args["enc_in"], args["seq_len"], args["pred_len"])

    def vali(self, loader, criterion):
        self.model.eval()
        with torch.no_grad():
            losses = [criterion(self.model(x), y).item() for x, y in loader]
        self.model.train()
        return sum(losses) / len(losses)

    def train(self):
        _, train_loader = data_provider(self.args, "train", self.splits["train"])
        _, vali_loader = data_provider(self.args, "val", self.splits["val"])
        model_optim = torch.optim.Adam(self.model.parameters(), lr=self.args["learning_rate"])
        criterion = nn.MSELoss()
        for epoch in range(self.args["train_epochs"]):
            self.model.train()
            train_loss = []
            for batch_x, batch_y in train_loader:
                model_optim.zero_grad()
                loss = criterion(self.model(batch_x), batch_y)
                train_loss.append(loss.item())
                loss.backward()
                model_optim.step()
            print(f"Epoch: {epoch + 1} | Train Loss: {sum(train_loss) / len(train_loss):.5f} "
                  f"Vali Loss: {self.vali(vali_loader, criterion):.5f}")

    def test(self):
        _, test_loader = data_provider(self.args, "test", self.splits["test"])
        self.model.eval()
        preds, trues = [], []
        with torch.no_grad():
            for batch_x, batch_y in test_loader:
                preds.append(self.model(batch_x))
                trues.append(batch_y)
        preds, trues = torch.cat(preds), torch.cat(trues)
        print("test shape:", tuple(preds.shape), tuple(trues.shape))
        print(f"mse:{((preds - trues) ** 2).mean().item():.4f}, mae:{(preds - trues).abs().mean().item():.4f}")


def main():
    torch.manual_seed(2021)
    args = {"seq_len": 36, "pred_len": 24, "enc_in": 7, "batch_size": 32, "learning_rate": 1e-3, "train_epochs": 4}
    data = make_series(1031, args["enc_in"], seed=0)
    train, val, test = data[:700], data[700:700 + 150], data[850 - args["seq_len"]:]
    exp = Exp_Main(args, {"train": train, "val": val, "test": test})
    exp.train()
    exp.test()


if __name__ == "__main__":
    main()
