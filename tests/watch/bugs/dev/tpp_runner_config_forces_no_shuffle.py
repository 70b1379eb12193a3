"""A temporal point process toolkit driven by config objects: RunnerConfig wraps a TrainerConfig
(batch_size, shuffle, lr, epochs), a TPPDataLoader builds the train and valid loaders from it, and a
Runner trains an RMTPP-style GRU model (event-type cross entropy plus an exponential inter-event
time likelihood) with Adam, validating each epoch. The user asks for shuffle=True, but
RunnerConfig's constructor runs a sanity-check hook written for evaluation that sets
trainer_config.shuffle = False unconditionally, so the training loader walks the sequences in file
order every epoch.

Thread: https://github.com/ant-research/EasyTemporalPointProcess/issues/54
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

NUM_TYPES, PAD = 4, 4


class TrainerConfig:
    def __init__(self, batch_size=32, shuffle=True, lr=3e-3, max_epoch=8, use_tfb=True):
        self.batch_size, self.shuffle, self.lr, self.max_epoch, self.use_tfb = batch_size, shuffle, lr, max_epoch, use_tfb


class RunnerConfig:
    def __init__(self, trainer_config, hidden_size=32):
        self.trainer_config = trainer_config
        self.hidden_size = hidden_size
        self.ensure_valid_config()

    def ensure_valid_config(self):
        # checks meant for the evaluation stage
        self.trainer_config.shuffle = False
        self.trainer_config.use_tfb = False


class TPPDataset(Dataset):
    def __init__(self, seqs):
        self.seqs = seqs

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        return self.seqs[i]


def pad_collate(batch):
    length = max(len(s["types"]) for s in batch)
    types = torch.full((len(batch), length), PAD, dtype=torch.long)
    dts = torch.zeros(len(batch), length)
    mask = torch.zeros(len(batch), length, dtype=torch.bool)
    for i, s in enumerate(batch):
        n = len(s["types"])
        types[i, :n], dts[i, :n], mask[i, :n] = s["types"], s["dts"], True
    return types, dts, mask


class TPPDataLoader:
    def __init__(self, runner_config, splits):
        self.kwargs = {"batch_size": runner_config.trainer_config.batch_size,
                       "shuffle": runner_config.trainer_config.shuffle}
        self.splits = splits

    def get_loader(self, split):
        return DataLoader(TPPDataset(self.splits[split]), batch_size=self.kwargs["batch_size"],
                          shuffle=self.kwargs["shuffle"], collate_fn=pad_collate,
                          generator=torch.Generator().manual_seed(0))


class RMTPP(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.embed = nn.Embedding(NUM_TYPES + 1, hidden_size, padding_idx=PAD)
        self.rnn = nn.GRU(hidden_size + 1, hidden_size, batch_first=True)
        self.type_head = nn.Linear(hidden_size, NUM_TYPES)
        self.rate_head = nn.Linear(hidden_size, 1)

    def loglike_loss(self, types, dts, mask):
        h, _ = self.rnn(torch.cat([self.embed(types), dts.unsqueeze(-1)], dim=-1))
        h, next_types, next_dts, next_mask = h[:, :-1], types[:, 1:], dts[:, 1:], mask[:, 1:]
        type_nll = F.cross_entropy(self.type_head(h)[next_mask], next_types[next_mask])
        rate = F.softplus(self.rate_head(h).squeeze(-1))[next_mask]
        time_nll = (rate * next_dts[next_mask] - torch.log(rate + 1e-8)).mean()
        return type_nll + time_nll


class Runner:
    def __init__(self, runner_config, data_loader):
        self.config = runner_config
        self.train_loader = data_loader.get_loader("train")
        self.valid_loader = data_loader.get_loader("dev")
        self.model = RMTPP(runner_config.hidden_size)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=runner_config.trainer_config.lr)

    def train_epoch(self):
        self.model.train()
        total = 0.0
        for types, dts, mask in self.train_loader:
            self.optimizer.zero_grad()
            loss = self.model.loglike_loss(types, dts, mask)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(self.train_loader)

    def valid_epoch(self):
        self.model.eval()
        with torch.no_grad():
            losses = [self.model.loglike_loss(*batch).item() for batch in self.valid_loader]
        return sum(losses) / len(losses)

    def run(self):
        for epoch in range(self.config.trainer_config.max_epoch):
            train_loss = self.train_epoch()
            print(f"epoch {epoch} train loss {train_loss:.4f} valid loss {self.valid_epoch():.4f}")


def synthetic_sequences(n, seed):
    g = torch.Generator().manual_seed(seed)
    trans = torch.softmax(2.0 * torch.randn(NUM_TYPES, NUM_TYPES, generator=torch.Generator().manual_seed(7)), dim=1)
    rates = torch.tensor([0.5, 1.0, 2.0, 4.0])
    seqs = []
    for _ in range(n):
        length = int(torch.randint(8, 20, (1,), generator=g))
        types = [int(torch.randint(0, NUM_TYPES, (1,), generator=g))]
        for _ in range(length - 1):
            types.append(int(torch.multinomial(trans[types[-1]], 1, generator=g)))
        types = torch.tensor(types)
        dts = torch.empty(length).exponential_(generator=g) / rates[types]
        dts[0] = 0.0
        seqs.append({"types": types, "dts": dts})
    return seqs


def main():
    torch.manual_seed(0)
    splits = {"train": synthetic_sequences(384, 1), "dev": synthetic_sequences(96, 2)}
    config = RunnerConfig(TrainerConfig(batch_size=32, shuffle=True))
    Runner(config, TPPDataLoader(config, splits)).run()


if __name__ == "__main__":
    main()
