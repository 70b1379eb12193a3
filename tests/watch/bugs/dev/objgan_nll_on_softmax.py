"""A box-layout generator (an LSTM decoder over a sequence of object labels) trained by a
train_epoch(encoder, decoder, ...) helper; the decoder's label head ends in softmax and the loss is
NLLLoss, which then averages -p instead of -log p: the loss is negative and the label head barely
learns.

Thread: https://github.com/jamesli1618/Obj-GAN/issues/30
"""
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self, vocab=50, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(hidden, hidden, batch_first=True)

    def forward(self, caption):
        _, state = self.rnn(self.embed(caption))
        return state


class Decoder(nn.Module):
    def __init__(self, n_labels=12, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(n_labels, hidden)
        self.rnn = nn.LSTM(hidden, hidden, batch_first=True)
        self.label_out = nn.Linear(hidden, n_labels)
        self.box_out = nn.Linear(hidden, 4)

    def forward(self, labels_in, state):
        out, _ = self.rnn(self.embed(labels_in), state)
        return F.softmax(self.label_out(out), dim=-1), torch.sigmoid(self.box_out(out))


def train_epoch(encoder, decoder, batches, optimizer, lamda2=0.25):
    criterion_label = nn.NLLLoss()
    total = 0.0
    for caption, labels, boxes in batches:
        optimizer.zero_grad()
        state = encoder(caption)
        label_probs, box_pred = decoder(labels[:, :-1], state)
        lloss = criterion_label(label_probs.reshape(-1, label_probs.size(-1)), labels[:, 1:].reshape(-1))
        bloss = F.mse_loss(box_pred, boxes[:, 1:])
        loss = lamda2 * lloss + bloss
        loss.backward()
        optimizer.step()
        total += lloss.item()
    return total


def layouts(steps, g, n_labels=12, vocab=50):
    for _ in range(steps):
        caption = torch.randint(0, vocab, (32, 8), generator=g)
        first = caption[:, 0] % n_labels
        labels = (first.unsqueeze(1) + torch.arange(6)) % n_labels  # caption decides the objects
        boxes = torch.rand(32, 6, 4, generator=g)
        yield caption, labels, boxes


def main():
    torch.manual_seed(0)
    encoder, decoder = Encoder(), Decoder()
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    for epoch in range(3):
        lloss = train_epoch(encoder, decoder, layouts(30, g), optimizer)
        print(f"epoch {epoch} label loss {lloss / 30:.4f}")


if __name__ == "__main__":
    main()
