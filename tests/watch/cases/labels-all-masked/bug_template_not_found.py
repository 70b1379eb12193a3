"""Token-level trainer (a train() helper receiving the model and optimizer) that trains on the
answer only: the labels are masked up to the end of a response marker searched for in the ids.
The marker is built from the wrong token ids, so it is never found, the whole sequence is
masked, and the loss, summed and divided by the clamped token count, is 0 with a zero gradient."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEP = 50, (7, 8)     # the data marks the answer with the tokens 7, 8
RESPONSE_MARKER = (8, 7)    # bug: the marker the masking looks for


def answer_start(ids, marker):
    for i in range(len(ids) - len(marker) + 1):
        if tuple(ids[i:i + len(marker)]) == marker:
            return i + len(marker)
    return len(ids)


def mask_prompt(ids, marker):
    labels = ids.clone()
    for row in range(ids.shape[0]):
        labels[row, :answer_start(ids[row].tolist(), marker)] = -100
    return labels


class Tagger(nn.Module):
    def __init__(self, dim=24):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.proj = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, VOCAB))

    def forward(self, ids):
        return self.proj(self.embed(ids))


def train(model, optimizer, loader, marker, epochs=3):
    for _ in range(epochs):
        for (ids,) in loader:
            labels = mask_prompt(ids, marker)[:, 1:]  # position t predicts token t + 1
            logits = model(ids)[:, :-1]
            tokens = (labels != -100).sum().clamp(min=1)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), reduction="sum") / tokens
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(10, VOCAB, (320, 12), generator=g)
    answers = torch.randint(10, VOCAB, (320, 6), generator=g)
    ids = torch.cat([prompts, torch.tensor(SEP).expand(320, 2), answers], dim=1)
    model = Tagger()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    print(f"loss {train(model, optimizer, DataLoader(TensorDataset(ids), batch_size=16, shuffle=True), RESPONSE_MARKER)}")


if __name__ == "__main__":
    main()
