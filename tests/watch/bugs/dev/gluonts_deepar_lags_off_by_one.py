"""A DeepAR model in the GluonTS PyTorch layout: a DeepARModel module mean-scales the context
window, builds the RNN input from lagged target values with a lagged_sequence_values(indices,
prior_sequence, sequence) helper, concatenates time features and static features (log scale),
runs an LSTM and projects to the parameters of a Normal distribution; a Lightning-style module's
training_step() returns the negative log-likelihood of the context-shifted and future targets,
and a small fit loop steps Adam on it. The RNN input sequence is the target itself (context plus
future minus the last point), and position i is trained to predict value i + 1; the helper
already reads lag L as sequence[i - L], yet the frequency's lags [1, 2, 3, 7, 14] are passed
unchanged, so "lag 1" is the value two steps before the one predicted. The most recent
observation never enters the RNN, and every step is trained as a two-step-ahead forecast.

Thread: https://github.com/awslabs/gluonts/issues/2616
"""
import math

import torch
from torch import nn


def lagged_sequence_values(indices, prior_sequence, sequence):
    full = torch.cat((prior_sequence, sequence), dim=-1)
    start = prior_sequence.shape[-1]
    return torch.stack([full[..., start - lag:start - lag + sequence.shape[-1]] for lag in indices], dim=-1)


def get_lags_for_frequency(freq):
    return [1, 2, 3, 7, 14] if freq == "D" else [1, 2, 3]


class DeepARModel(nn.Module):
    def __init__(self, freq, context_length, prediction_length, num_time_feat=2, hidden_size=40):
        super().__init__()
        self.context_length, self.prediction_length = context_length, prediction_length
        self.lags_seq = get_lags_for_frequency(freq)
        self.past_length = context_length + max(self.lags_seq)
        self.rnn = nn.LSTM(len(self.lags_seq) + num_time_feat + 1, hidden_size, num_layers=2, batch_first=True)
        self.param_proj = nn.Linear(hidden_size, 2)

    def unroll_lagged_rnn(self, past_target, past_time_feat, future_time_feat, future_target):
        context = past_target[..., -self.context_length:]
        scale = context.abs().mean(-1, keepdim=True).clamp(min=1e-5)
        prior_input = past_target[..., :-self.context_length] / scale
        input = torch.cat((context, future_target[..., :-1]), dim=-1) / scale
        lags = lagged_sequence_values(self.lags_seq, prior_input, input)
        time_feat = torch.cat((past_time_feat[..., -self.context_length + 1:, :], future_time_feat), dim=-2)
        static = scale.log().unsqueeze(-1).expand(-1, time_feat.shape[-2], 1)
        output, _ = self.rnn(torch.cat((lags, time_feat, static), dim=-1))
        return output, scale

    def loss(self, past_target, past_time_feat, future_time_feat, future_target):
        output, scale = self.unroll_lagged_rnn(past_target, past_time_feat, future_time_feat, future_target)
        loc, raw_scale = self.param_proj(output).unbind(-1)
        distr = torch.distributions.Normal(loc * scale, nn.functional.softplus(raw_scale) * scale + 1e-3)
        target = torch.cat((past_target[..., -self.context_length + 1:], future_target), dim=-1)
        return -distr.log_prob(target).mean()


class DeepARLightningModule(nn.Module):
    def __init__(self, model, lr=1e-3):
        super().__init__()
        self.model, self.lr = model, lr

    def training_step(self, batch):
        return self.model.loss(batch["past_target"], batch["past_time_feat"],
                               batch["future_time_feat"], batch["future_target"])

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def make_dataset(n_series, length, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(length, dtype=torch.float32)
    series = torch.zeros(n_series, length)
    level = 10.0 + 5.0 * torch.rand(n_series, generator=g)
    noise = torch.zeros(n_series)
    for i in range(length):
        noise = 0.9 * noise + 0.6 * torch.randn(n_series, generator=g)
        series[:, i] = level + 1.5 * torch.sin(2 * math.pi * t[i] / 7) + noise
    time_feat = torch.stack((torch.sin(2 * math.pi * t / 7), torch.cos(2 * math.pi * t / 7)), -1)
    return series, time_feat


def sample_batch(series, time_feat, past_length, pred_len, batch_size, g):
    rows = torch.randint(0, series.shape[0], (batch_size,), generator=g)
    starts = torch.randint(0, series.shape[1] - past_length - pred_len, (batch_size,), generator=g)
    window = torch.stack([series[r, s:s + past_length + pred_len] for r, s in zip(rows, starts)])
    feats = torch.stack([time_feat[s:s + past_length + pred_len] for s in starts])
    return {"past_target": window[:, :past_length], "future_target": window[:, past_length:],
            "past_time_feat": feats[:, :past_length], "future_time_feat": feats[:, past_length:]}


def main():
    torch.manual_seed(0)
    series, time_feat = make_dataset(40, 300, seed=1)
    module = DeepARLightningModule(DeepARModel("D", context_length=28, prediction_length=7))
    optimizer = module.configure_optimizers()
    g = torch.Generator().manual_seed(0)
    past_length = module.model.past_length
    for step in range(120):
        batch = sample_batch(series, time_feat, past_length, 7, 32, g)
        optimizer.zero_grad()
        loss = module.training_step(batch)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}  train_loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
