"""An instruction-tuning Trainer in the style of many SFT scripts: the dataset returns prompt + answer
+ eos token ids with the prompt part of the labels set to -100, the DataLoader's collate function
pads with PAD_ID and then masks every position holding PAD_ID, and compute_loss applies log_softmax
and nll_loss. The config sets PAD_ID = EOS_ID because the vocabulary has no pad token, so the eos
that closes every answer is masked too and the model never learns where an answer stops."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

EOS_ID, SEP_ID, VOCAB = 1, 2, 36
PAD_ID = EOS_ID  # "no pad token: reuse eos"


class SFTDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            prompt = torch.randint(3, VOCAB, (int(torch.randint(3, 8, (1,), generator=g)),), generator=g).tolist()
            answer = sorted(prompt)[:int(torch.randint(1, len(prompt) + 1, (1,), generator=g))]
            ids = prompt + [SEP_ID] + answer + [EOS_ID]
            self.items.append((ids, [-100] * (len(prompt) + 1) + answer + [EOS_ID]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), PAD_ID)
    labels = torch.full((len(batch), width), PAD_ID)
    for i, (ids, lab) in enumerate(batch):
        input_ids[i, :len(ids)], labels[i, :len(lab)] = torch.tensor(ids), torch.tensor(lab)
    labels[labels == PAD_ID] = -100
    return {"input_ids": input_ids, "labels": labels}


class Decoder(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.LSTM(dim, dim, batch_first=True)
        self.output = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        return self.output(self.layers(self.tok_embeddings(input_ids))[0])


class Trainer:
    def __init__(self, model, dataset):
        self.model = model
        self.loader = DataLoader(dataset, batch_size=24, shuffle=True, collate_fn=collate,
                                 generator=torch.Generator().manual_seed(0))
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def compute_loss(self, batch):
        logprobs = F.log_softmax(self.model(batch["input_ids"])[:, :-1], dim=-1)
        return F.nll_loss(logprobs.reshape(-1, VOCAB), batch["labels"][:, 1:].reshape(-1))

    def train(self, epochs):
        for epoch in range(epochs):
            for batch in self.loader:
                loss = self.compute_loss(batch)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    Trainer(Decoder(), SFTDataset(1200, seed=0)).train(epochs=2)


if __name__ == "__main__":
    main()
