"""An attention text recognizer in the SAR (show, attend and read) style of a docTR-like library: a
small CNN feature extractor, an LSTM encoder over the vertically max-pooled features, and a decoder
of two LSTMCells with 2D attention over the feature map, fed the previous ground-truth symbol
(teacher forcing). The model's forward(images, target) builds the encoded targets (words padded with
the <eos> index up to max_length + 1) and returns {'loss': compute_loss(...)}. A reference-script
style fit_one_epoch(model, train_loader, batch_transforms, optimizer, scheduler) does zero_grad /
backward / clip_grad_norm_(5) / step / OneCycleLR step. In compute_loss the 2D mask is inverted:
mask = arange(L) < seq_len + 1 selects the word and its <eos>, and then cce[mask] = 0 zeroes exactly
those positions, so only the <eos> padding after the word is scored.

Thread: https://github.com/mindee/doctr/pull/831
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = "abcdefgh"
MAX_LENGTH, IMG_H, IMG_W, SLOT = 6, 16, 64, 10


def encode_sequences(words, vocab, target_size, eos):
    out = torch.full((len(words), target_size), eos, dtype=torch.long)
    for i, w in enumerate(words):
        out[i, :len(w)] = torch.tensor([vocab.index(c) for c in w])
    return out


class AttentionModule(nn.Module):
    def __init__(self, feat_chans, state_chans, units):
        super().__init__()
        self.feat_conv = nn.Conv2d(feat_chans, units, 3, padding=1)
        self.state_conv = nn.Conv2d(state_chans, units, 1, bias=False)
        self.proj = nn.Conv2d(units, 1, 1, bias=False)

    def forward(self, features, hidden):
        att = self.proj(torch.tanh(self.feat_conv(features) + self.state_conv(hidden[..., None, None])))
        att = torch.softmax(att.flatten(1), 1).view(-1, 1, features.shape[-2], features.shape[-1])
        return (features * att).sum(dim=(2, 3))


class SARDecoder(nn.Module):
    def __init__(self, rnn_units, vocab_size, embedding_units, attention_units, feat_chans):
        super().__init__()
        self.vocab_size = vocab_size
        self.cells = nn.ModuleList([nn.LSTMCell(rnn_units, rnn_units) for _ in range(2)])
        self.embed = nn.Linear(vocab_size + 1, embedding_units, bias=False)
        self.attention = AttentionModule(feat_chans, rnn_units, attention_units)
        self.output_dense = nn.Linear(rnn_units + feat_chans, vocab_size + 1)

    def forward(self, features, holistic, gt):
        hx = [None, None]
        symbol = torch.zeros(features.shape[0], self.vocab_size + 1)    # virtual <start>: all-zero one-hot
        logits_list = []
        for t in range(MAX_LENGTH + 1):
            hx[0] = self.cells[0](self.embed(symbol) + holistic, hx[0])
            hx[1] = self.cells[1](hx[0][0], hx[1])
            state = hx[1][0]
            logits = self.output_dense(torch.cat([state, self.attention(features, state)], 1))
            symbol = F.one_hot(gt[:, t], self.vocab_size + 1).float()
            logits_list.append(logits)
        return torch.stack(logits_list, 1)


class SAR(nn.Module):
    def __init__(self, vocab, rnn_units=48):
        super().__init__()
        self.vocab = vocab
        self.feat_extractor = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d((2, 1)))
        self.encoder = nn.LSTM(32, rnn_units, 2, batch_first=True)
        self.decoder = SARDecoder(rnn_units, len(vocab), rnn_units, 32, 32)

    def build_target(self, gts):
        return encode_sequences(gts, self.vocab, MAX_LENGTH + 1, eos=len(self.vocab)), torch.tensor([len(w) for w in gts])

    def forward(self, x, target=None):
        features = self.feat_extractor(x)
        pooled = features.max(dim=-2).values.transpose(1, 2)          # (N, W, C)
        _, (encoded, _) = self.encoder(pooled)
        gt, seq_len = self.build_target(target)
        decoded = self.decoder(features, encoded[-1], gt)
        return {"out_map": decoded, "loss": self.compute_loss(decoded, gt, seq_len)}

    @staticmethod
    def compute_loss(model_output, gt, seq_len):
        input_len = model_output.shape[1]
        seq_len = seq_len + 1                                          # one more for <eos>
        cce = F.cross_entropy(model_output.permute(0, 2, 1), gt, reduction="none")
        mask_2d = torch.arange(input_len)[None, :] < seq_len[:, None]
        cce[mask_2d] = 0
        ce_loss = cce.sum(1) / seq_len.to(dtype=model_output.dtype)
        return ce_loss.mean()


def make_loader(n_batches, bs, seed):
    g = torch.Generator().manual_seed(seed)
    glyphs = (torch.rand(len(VOCAB), IMG_H - 4, SLOT - 2, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    batches = []
    for _ in range(n_batches):
        images = 0.2 * torch.rand(bs, 1, IMG_H, IMG_W, generator=g)
        words = []
        for i in range(bs):
            n = int(torch.randint(2, MAX_LENGTH, (1,), generator=g))
            idx = torch.randint(0, len(VOCAB), (n,), generator=g)
            words.append("".join(VOCAB[j] for j in idx))
            for k, j in enumerate(idx):
                images[i, 0, 2:IMG_H - 2, k * SLOT + 1:(k + 1) * SLOT - 1] += glyphs[j]
        batches.append((images, words))
    return batches


def fit_one_epoch(model, train_loader, batch_transforms, optimizer, scheduler):
    model.train()
    for images, targets in train_loader:
        images = batch_transforms(images)
        train_loss = model(images, targets)["loss"]
        optimizer.zero_grad()
        train_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5)
        optimizer.step()
        scheduler.step()
    return train_loss.item()


@torch.no_grad()
def evaluate(model, val_loader, batch_transforms):
    model.eval()
    exact, total = 0, 0
    for images, targets in val_loader:
        out = model(batch_transforms(images), targets)["out_map"].argmax(-1)
        for row, word in zip(out, targets):
            chars = [VOCAB[j] for j in row.tolist() if j < len(VOCAB)]
            exact, total = exact + int("".join(chars[:len(word)]) == word), total + 1
    return exact / total


def main():
    torch.manual_seed(0)
    model = SAR(VOCAB)
    train_loader, val_loader = make_loader(24, 32, seed=0), make_loader(4, 32, seed=1)
    batch_transforms = lambda x: (x - 0.5) / 0.5
    epochs = 3
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 3e-3, total_steps=epochs * len(train_loader))
    for epoch in range(epochs):
        loss = fit_one_epoch(model, train_loader, batch_transforms, optimizer, scheduler)
        print(f"epoch {epoch} train loss {loss:.4f} val exact match {evaluate(model, val_loader, batch_transforms):.3f}")


if __name__ == "__main__":
    main()
