"""A recurrent marked temporal point process (RMTPP-style): a base model class holds the mark
embedding and the log-likelihood pieces (event term minus a Monte Carlo estimate of the integral of
the intensities); the RMTPP subclass adds a temporal embedding of the event times, an nn.RNN, a
linear layer to one score per mark, and the per-mark factors of the intensity
exp(W h + w * dt + b). loglike_loss(batch) returns the summed negative log-likelihood, and a small
trainer runs Adam over model.parameters().

The bug: the per-mark factors w (current influence of the elapsed time) and b (base intensity) are
created in __init__ as plain tensors with torch.empty and filled by nn.init.xavier_normal_, not
wrapped in nn.Parameter, so they are not registered with the module, never reach
model.parameters() or the optimizer, and keep their random initial values for the whole run.

Thread: https://github.com/ant-research/EasyTemporalPointProcess/issues/23
"""
import torch
from torch import nn

NUM_TYPES, PAD = 4, 4


class TorchBaseModel(nn.Module):
    def __init__(self, hidden_size, num_event_types, loss_integral_num_sample_per_step=16):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_event_types = num_event_types
        self.num_samples = loss_integral_num_sample_per_step
        self.layer_type_emb = nn.Embedding(num_event_types + 1, hidden_size, padding_idx=num_event_types)

    def make_dtime_loss_samples(self, time_delta_seq):
        ratios = torch.linspace(0.0, 1.0, self.num_samples)
        return time_delta_seq[..., None] * ratios

    def compute_loglikelihood(self, lambda_at_event, lambdas_loss_samples, time_delta_seq, seq_mask, lambda_type_mask):
        event_lambdas = (lambda_at_event * lambda_type_mask).sum(-1) + 1e-8
        event_ll = torch.log(event_lambdas).masked_fill(~seq_mask, 0.0)
        non_event_ll = lambdas_loss_samples.sum(-1).mean(-1) * time_delta_seq * seq_mask
        return event_ll.sum(), non_event_ll.sum(), int(seq_mask.sum().item())


class RMTPP(TorchBaseModel):
    def __init__(self, hidden_size=32, num_event_types=NUM_TYPES):
        super().__init__(hidden_size, num_event_types)
        self.layer_temporal_emb = nn.Linear(1, hidden_size)
        self.layer_rnn = nn.RNN(hidden_size, hidden_size, num_layers=1, batch_first=True)
        self.layer_hidden = nn.Linear(hidden_size, num_event_types)
        self.factor_intensity_base = torch.empty([1, 1, num_event_types])
        self.factor_intensity_current_influence = torch.empty([1, 1, num_event_types])
        nn.init.xavier_normal_(self.factor_intensity_base)
        nn.init.xavier_normal_(self.factor_intensity_current_influence)

    def state_decay(self, states_to_decay, duration_t):
        scores = self.layer_hidden(states_to_decay)
        return torch.exp(scores + self.factor_intensity_current_influence * duration_t
                         + self.factor_intensity_base).clamp(max=1e5)

    def forward(self, time_seqs, time_delta_seqs, type_seqs):
        emb = self.layer_type_emb(type_seqs) + self.layer_temporal_emb(time_seqs[..., None])
        decay_states, _ = self.layer_rnn(emb)
        return self.state_decay(decay_states, time_delta_seqs[..., None]), decay_states

    def loglike_loss(self, batch):
        time_seqs, time_delta_seqs, type_seqs, batch_non_pad_mask, type_mask = batch
        lambda_at_event, decay_states = self.forward(time_seqs[:, :-1], time_delta_seqs[:, 1:], type_seqs[:, :-1])
        sample_dtimes = self.make_dtime_loss_samples(time_delta_seqs[:, 1:])
        lambda_t_sample = self.state_decay(decay_states[..., None, :], sample_dtimes[..., None])
        event_ll, non_event_ll, num_events = self.compute_loglikelihood(
            lambda_at_event, lambda_t_sample, time_delta_seqs[:, 1:],
            batch_non_pad_mask[:, 1:], type_mask[:, 1:])
        return -(event_ll - non_event_ll), num_events


def make_sequences(n_seqs=384, seed=0):
    g = torch.Generator().manual_seed(seed)
    rate = torch.tensor([0.5, 1.0, 2.0, 4.0])
    seqs = []
    for _ in range(n_seqs):
        length = int(torch.randint(10, 21, (1,), generator=g))
        k = int(torch.randint(0, NUM_TYPES, (1,), generator=g))
        types, dts = [k], [0.0]
        for _ in range(length - 1):
            dts.append(float(torch.empty(1).exponential_(float(rate[k]), generator=g)))
            k = (k + 1) % NUM_TYPES if torch.rand(1, generator=g) < 0.7 else int(torch.randint(0, NUM_TYPES, (1,), generator=g))
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
    type_mask = nn.functional.one_hot(types, NUM_TYPES + 1)[..., :NUM_TYPES].float()
    return dts.cumsum(1), dts, types, mask, type_mask


def train(model, seqs, epochs=6, batch_size=32, lr=5e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(1)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(seqs), generator=g).tolist()
        total, events = 0.0, 0
        for i in range(0, len(order), batch_size):
            batch = collate([seqs[j] for j in order[i:i + batch_size]])
            loss, num_events = model.loglike_loss(batch)
            optimizer.zero_grad()
            (loss / num_events).backward()
            optimizer.step()
            total, events = total + loss.item(), events + num_events
        print(f"epoch {epoch} train loglike per event {-total / events:.4f}")


def main():
    torch.manual_seed(0)
    train(RMTPP(), make_sequences())


if __name__ == "__main__":
    main()
