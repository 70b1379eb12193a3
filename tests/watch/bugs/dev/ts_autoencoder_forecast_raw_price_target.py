"""A time-series forecasting package: a TimeSeriesDataset class standardizes the numerical feature
columns (scaler fitted on the first 80% of the rows), frames sliding windows of seq_len steps with
the lagged target history y_hist, and builds unshuffled DataLoaders; AutoEncForecast is an
attention LSTM encoder-decoder (input attention in the encoder, temporal attention in the decoder
fed with y_hist); train(train_iter, test_iter, model, criterion, optimizer, config) runs Adam with
an L1 penalty, gradient clipping and a StepLR scheduler, and evaluates every logging_steps.
preprocess_data returns the target column as raw values: the model regresses a stock price in
the hundreds with MSELoss (and reads the raw prices as y_hist), while its output starts near zero.

Thread: https://github.com/JulesBelveze/time-series-autoencoder/issues/18
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TimeSeriesDataset:
    def __init__(self, data, columns, target_col, seq_length, prediction_window=1):
        self.data, self.columns, self.target_col = data, columns, target_col
        self.numerical_cols = [c for c in columns if c != target_col]
        self.seq_length, self.prediction_window = seq_length, prediction_window

    def preprocess_data(self):
        X = self.data[:, [self.columns.index(c) for c in self.numerical_cols]]
        y = self.data[:, [self.columns.index(self.target_col)]]
        n_train = int(0.8 * len(X))
        X_train, X_test, y_train, y_test = X[:n_train], X[n_train:], y[:n_train], y[n_train:]
        mean, std = X_train.mean(0), X_train.std(0)
        X_train, X_test = (X_train - mean) / std, (X_test - mean) / std
        return X_train, X_test, y_train, y_test

    def frame_series(self, X, y):
        features, y_hist, target = [], [], []
        for i in range(1, len(X) - self.seq_length - self.prediction_window):
            features.append(torch.FloatTensor(X[i:i + self.seq_length]).unsqueeze(0))
            y_hist.append(torch.FloatTensor(y[i - 1:i + self.seq_length - 1]).unsqueeze(0))
            target.append(torch.FloatTensor(y[i + self.seq_length:i + self.seq_length + self.prediction_window]))
        return TensorDataset(torch.cat(features), torch.cat(y_hist), torch.cat(target))

    def get_loaders(self, batch_size):
        X_train, X_test, y_train, y_test = self.preprocess_data()
        train_iter = DataLoader(self.frame_series(X_train, y_train), batch_size=batch_size, shuffle=False, drop_last=True)
        test_iter = DataLoader(self.frame_series(X_test, y_test), batch_size=batch_size, shuffle=False, drop_last=True)
        return train_iter, test_iter, X_train.shape[1]


class AttnEncoder(nn.Module):
    def __init__(self, input_size, hidden_size, seq_len):
        super().__init__()
        self.lstm = nn.LSTMCell(input_size, hidden_size)
        self.attn = nn.Linear(2 * hidden_size + seq_len, 1)
        self.hidden_size = hidden_size

    def forward(self, x):
        B, T, n = x.shape
        h, c = x.new_zeros(B, self.hidden_size), x.new_zeros(B, self.hidden_size)
        encoded = []
        for t in range(T):
            hc = torch.cat([h, c], dim=1).unsqueeze(1).expand(B, n, -1)
            scores = self.attn(torch.cat([hc, x.transpose(1, 2)], dim=2)).squeeze(2)
            h, c = self.lstm(torch.softmax(scores, dim=1) * x[:, t], (h, c))
            encoded.append(h)
        return torch.stack(encoded, dim=1)


class AttnDecoder(nn.Module):
    def __init__(self, hidden_size, output_size=1):
        super().__init__()
        self.attn = nn.Sequential(nn.Linear(3 * hidden_size, hidden_size), nn.Tanh(), nn.Linear(hidden_size, 1))
        self.lstm = nn.LSTMCell(1, hidden_size)
        self.fc = nn.Linear(hidden_size + 1, 1)
        self.fc_out = nn.Linear(2 * hidden_size, output_size)
        self.hidden_size = hidden_size

    def forward(self, encoded, y_hist):
        B, T, _ = encoded.shape
        h, c = encoded.new_zeros(B, self.hidden_size), encoded.new_zeros(B, self.hidden_size)
        for t in range(T):
            hc = torch.cat([h, c], dim=1).unsqueeze(1).expand(B, T, -1)
            beta = torch.softmax(self.attn(torch.cat([hc, encoded], dim=2)).squeeze(2), dim=1)
            context = (beta.unsqueeze(2) * encoded).sum(1)
            h, c = self.lstm(self.fc(torch.cat([context, y_hist[:, t]], dim=1)), (h, c))
        return self.fc_out(torch.cat([h, context], dim=1))


class AutoEncForecast(nn.Module):
    def __init__(self, config, input_size):
        super().__init__()
        self.encoder = AttnEncoder(input_size, config["hidden_size_encoder"], config["seq_len"])
        self.decoder = AttnDecoder(config["hidden_size_decoder"], config["output_size"])

    def forward(self, x, y_hist):
        return self.decoder(self.encoder(x), y_hist)


def evaluate(test_iter, criterion, model, config):
    model.eval()
    eval_loss, preds = 0.0, []
    with torch.no_grad():
        for feature, y_hist, target in test_iter:
            output = model(feature, y_hist)
            eval_loss += criterion(output, target).item()
            preds.append(output)
    return {"loss": eval_loss / len(test_iter), "mean_prediction": torch.cat(preds).mean().item()}


def train(train_iter, test_iter, model, criterion, optimizer, config):
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=config["lrs_step_size"], gamma=0.5)
    global_step, train_loss, logging_loss = 0, 0.0, 0.0
    for epoch in range(config["num_epochs"]):
        for i, (feature, y_hist, target) in enumerate(train_iter):
            model.train()
            optimizer.zero_grad()
            output = model(feature, y_hist)
            loss = criterion(output, target)
            if config["reg1"]:
                params = torch.cat([p.view(-1) for name, p in model.named_parameters() if "bias" not in name])
                loss += config["reg_factor1"] * torch.norm(params, 1)
            if config["gradient_accumulation_steps"] > 1:
                loss = loss / config["gradient_accumulation_steps"]
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"])
            train_loss += loss.item()
            if (i + 1) % config["gradient_accumulation_steps"] == 0:
                optimizer.step()
                scheduler.step()
                global_step += 1
                if global_step % config["logging_steps"] == 0:
                    results = evaluate(test_iter, criterion, model, config)
                    print(f"step {global_step} train_loss {(train_loss - logging_loss) / config['logging_steps']:.1f} "
                          f"eval_loss {results['loss']:.1f} mean_pred {results['mean_prediction']:.3f}")
                    logging_loss = train_loss


def stock_table(n_rows=1300, seed=0):
    rng = np.random.default_rng(seed)
    close = 300.0 + np.cumsum(rng.normal(0.15, 3.0, n_rows))
    open_ = close + rng.normal(0, 2.0, n_rows)
    high = np.maximum(open_, close) + np.abs(rng.normal(0, 2.0, n_rows))
    low = np.minimum(open_, close) - np.abs(rng.normal(0, 2.0, n_rows))
    volume = rng.lognormal(15, 0.3, n_rows)
    return np.stack([open_, high, low, volume, close], axis=1).astype(np.float32)


def main():
    torch.manual_seed(0)
    config = dict(output_size=1, num_epochs=2, batch_size=16, lr=1e-5, reg1=True, reg_factor1=1e-4,
                  seq_len=10, prediction_window=1, hidden_size_encoder=32, hidden_size_decoder=32,
                  max_grad_norm=0.1, gradient_accumulation_steps=1, logging_steps=20, lrs_step_size=5000)
    ts = TimeSeriesDataset(stock_table(), ["Open", "High", "Low", "Volume", "Close"], "Close",
                           config["seq_len"], config["prediction_window"])
    train_iter, test_iter, nb_features = ts.get_loaders(batch_size=config["batch_size"])
    model = AutoEncForecast(config, input_size=nb_features)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    train(train_iter, test_iter, model, criterion, optimizer, config)


if __name__ == "__main__":
    main()
