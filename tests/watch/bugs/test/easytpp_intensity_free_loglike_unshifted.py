"""An intensity-free temporal point process (IFTPP-style): a GRU reads, per event, the log inter-event
time and a mark embedding; a linear layer gives the weights, means and log-scales of a log-normal
mixture for the next inter-event time and a second linear layer the next mark's logits. A base model
class holds the shared pieces, the model's loglike_loss(batch) returns the summed negative
log-likelihood and the event count, and a Runner trains it with Adam.

The bug: loglike_loss feeds the GRU the inter-event times time_delta_seqs[:, 1:] (the very
intervals it then scores as targets) together with type_seqs[:, :-1], and scores the mark
distribution against type_seqs[:, :-1], the marks it was conditioned on. Each position therefore
sees the interval and the mark it is asked to predict, the loss falls fast and the model learns no
forecasting.

Thread: https://github.com/ant-research/EasyTemporalPointProcess/pull/48
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

NUM_TYPES, PAD = 5, 5


class LogNormalMixture:
    def __init__(self, locs, log_scales, log_weights, mean_log_inter_time, std_log_inter_time):
        self.locs, self.log_scales, self.log_weights = locs, log_scales, log_weights
        self.mu, self.sigma = mean_log_inter_time, std_log_inter_time

    def log_prob(self, x):
        y = torch.log(x)
        z = (y - self.mu) / self.sigma
        z = z.unsqueeze(-1)
        comp = (-0.5 * ((z - self.locs) / self.log_scales.exp()) ** 2 - self.log_scales
                - 0.5 * math.log(2 * math.pi))
        return torch.logsumexp(self.log_weights + comp, dim=-1) - math.log(self.sigma) - y


class TorchBaseModel(nn.Module):
    def __init__(self, hidden_size, num_event_types):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_event_types = num_event_types
        self.pad_token_id = num_event_types
        self.layer_type_emb = nn.Embedding(num_event_types + 1, hidden_size, padding_idx=num_event_types)


class IntensityFree(TorchBaseModel):
    def __init__(self, hidden_size=32, num_event_types=NUM_TYPES, num_mix_components=4):
        super().__init__(hidden_size, num_event_types)
        self.num_mix_components = num_mix_components
        self.layer_rnn = nn.GRU(1 + hidden_size, hidden_size, num_layers=1, batch_first=True)
        self.linear = nn.Linear(hidden_size, 3 * num_mix_components)
        self.mark_linear = nn.Linear(hidden_size, num_event_types + 1)
        self.mean_log_inter_time, self.std_log_inter_time = 0.0, 1.0

    def forward(self, time_delta_seqs, type_seqs):
        log_dt = torch.log(time_delta_seqs.clamp(min=1e-5)).unsqueeze(-1)
        features = torch.cat([log_dt, self.layer_type_emb(type_seqs)], dim=-1)
        context, _ = self.layer_rnn(features)
        return context

    def loglike_loss(self, batch):
        time_seqs, time_delta_seqs, type_seqs, batch_non_pad_mask = batch
        context = self.forward(time_delta_seqs[:, 1:], type_seqs[:, :-1])
        raw = self.linear(context)
        k = self.num_mix_components
        locs, log_scales, log_weights = raw[..., :k], raw[..., k:2 * k].clamp(-5.0, 3.0), raw[..., 2 * k:]
        dist = LogNormalMixture(locs, log_scales, torch.log_softmax(log_weights, dim=-1),
                                self.mean_log_inter_time, self.std_log_inter_time)
        inter_times = time_delta_seqs[:, 1:].clamp(min=1e-5)
        log_p = dist.log_prob(inter_times)
        mark_logits = torch.log_softmax(self.mark_linear(context), dim=-1)
        log_p = log_p + mark_logits.gather(-1, type_seqs[:, :-1].unsqueeze(-1)).squeeze(-1)
        mask = batch_non_pad_mask[:, 1:].float()
        loss = -(log_p * mask).sum(-1).mean()
        return loss, int(mask.sum().item())


def make_sequences(n_seqs=512, max_len=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    trans = torch.softmax(3.0 * torch.randn(NUM_TYPES, NUM_TYPES, generator=g), dim=-1)
    rate = torch.linspace(0.4, 3.0, NUM_TYPES)
    seqs = []
    for _ in range(n_seqs):
        length = int(torch.randint(12, max_len + 1, (1,), generator=g))
        k = int(torch.randint(0, NUM_TYPES, (1,), generator=g))
        types, dts = [k], [0.0]
        for _ in range(length - 1):
            dts.append(float(torch.empty(1).exponential_(float(rate[k]), generator=g)))
            k = int(torch.multinomial(trans[k], 1, generator=g))
            types.append(k)
        seqs.append((dts, types))
    return seqs


def collate(seqs):
    max_len = max(len(t) for _, t in seqs)
    dts = torch.zeros(len(seqs), max_len)
    types = torch.full((len(seqs), max_len), PAD, dtype=torch.long)
    mask = torch.zeros(len(seqs), max_len, dtype=torch.bool)
    for i, (d, t) in enumerate(seqs):
        dts[i, :len(d)] = torch.tensor(d)
        types[i, :len(t)] = torch.tensor(t)
        mask[i, :len(t)] = True
    return dts.cumsum(1), dts, types, mask


class Runner:
    def __init__(self, model, train_seqs, batch_size=32, lr=3e-3, max_epoch=6):
        self.model, self.train_seqs = model, train_seqs
        self.batch_size, self.max_epoch = batch_size, max_epoch
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def train_epoch(self, g):
        self.model.train()
        order = torch.randperm(len(self.train_seqs), generator=g).tolist()
        total, events = 0.0, 0
        for i in range(0, len(order), self.batch_size):
            batch = collate([self.train_seqs[j] for j in order[i:i + self.batch_size]])
            self.optimizer.zero_grad()
            loss, num_events = self.model.loglike_loss(batch)
            (loss / num_events).backward()
            self.optimizer.step()
            total, events = total + loss.item() * len(batch[0]), events + num_events
        return -total / events

    def run(self):
        g = torch.Generator().manual_seed(1)
        for epoch in range(self.max_epoch):
            print(f"[ Epoch {epoch} (train) ]: train loglike is {self.train_epoch(g):.4f}")


def main():
    torch.manual_seed(0)
    Runner(IntensityFree(), make_sequences()).run()


if __name__ == "__main__":
    main()
