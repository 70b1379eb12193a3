"""A CTC speech-recognition lab: a CTCModel (two strided Conv2d + BatchNorm + Hardtanh blocks over a
packed mel spectrogram, a bidirectional GRU, a linear layer over the characters and the blank)
returns a PackedSequence of per-frame scores. The loss is nn.CTCLoss(blank, reduction="mean",
zero_infinity=True) called through a wrap_ctc_args(packed_predictions, packed_targets) helper that
unpacks predictions and targets; generic ftrain/ftest helpers take the model, loader, loss and
optimizer. In wrap_ctc_args the log_softmax over the vocabulary is commented out, so CTCLoss
receives raw scores where it expects log-probabilities.

Thread: https://github.com/jeremyfix/deeplearning-lectures/issues/22
"""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

BLANK_ID, VOCAB_SIZE, N_MELS = 0, 10, 20


class CTCModel(nn.Module):
    def __init__(self, n_mels, nhidden_rnn, nlayers_rnn, dropout):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=(5, 5), stride=2, padding=(2, 2)),
            nn.BatchNorm2d(8), nn.Hardtanh(0, 20, inplace=True), nn.Dropout2d(dropout),
            nn.Conv2d(8, 8, kernel_size=(5, 5), stride=(2, 1), padding=(2, 2)),
            nn.BatchNorm2d(8), nn.Hardtanh(0, 20, inplace=True), nn.Dropout2d(dropout))
        self.rnn = nn.GRU(8 * n_mels // 2, nhidden_rnn, num_layers=nlayers_rnn, bidirectional=True)
        self.charlin = nn.Linear(2 * nhidden_rnn, VOCAB_SIZE)

    def forward(self, inputs):
        unpacked, lens = pad_packed_sequence(inputs)              # (T, B, n_mels)
        out = self.cnn(unpacked.transpose(0, 1).unsqueeze(1))    # (B, C, T/4, n_mels/2)
        B, To = out.shape[0], out.shape[2]
        out = out.permute(2, 0, 1, 3).reshape(To, B, -1)
        packed_rnn, _ = self.rnn(pack_padded_sequence(out, lengths=lens // 4, enforce_sorted=False))
        unpacked_rnn, lens_rnn = pad_packed_sequence(packed_rnn)
        return pack_padded_sequence(self.charlin(unpacked_rnn), lengths=lens_rnn, enforce_sorted=False)


def wrap_ctc_args(packed_predictions, packed_targets):
    """Returns predictions, targets, lens_predictions, lens_targets for the CTC loss."""
    unpacked_predictions, lens_predictions = pad_packed_sequence(packed_predictions)  # T, B, vocab
    # compute the log_softmax
    # unpacked_predictions = unpacked_predictions.log_softmax(dim=2)
    unpacked_targets, lens_targets = pad_packed_sequence(packed_targets)  # T, B
    return unpacked_predictions, unpacked_targets.transpose(0, 1), lens_predictions, lens_targets


def ftrain(model, loader, loss, optimizer, device, metrics, grad_clip=None, num_epoch=0):
    model.train()
    total, n = 0.0, 0
    for spectro, transcripts in loader:
        outputs = model(spectro.to(device))
        batch_loss = loss(outputs, transcripts.to(device))
        optimizer.zero_grad()
        batch_loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        total, n = total + batch_loss.item(), n + 1
    return {name: total / n for name in metrics}


def ftest(model, loader, device, metrics):
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for spectro, transcripts in loader:
            total, n = total + metrics["CTC"](model(spectro.to(device)), transcripts.to(device)).item(), n + 1
    return {name: total / n for name in metrics}


def make_loader(n_utts, batch_size, seed):
    """Yields (packed spectrogram, packed transcript) batches of variable-length utterances."""
    g = torch.Generator().manual_seed(seed)
    protos = 1.5 * torch.randn(VOCAB_SIZE, N_MELS, generator=torch.Generator().manual_seed(5))
    utts = []
    for _ in range(n_utts):
        n_chars = int(torch.randint(4, 9, (1,), generator=g))
        chars = torch.randint(1, VOCAB_SIZE, (n_chars,), generator=g)
        frames = protos[chars].repeat_interleave(8, dim=0)
        utts.append((frames + torch.randn(frames.shape, generator=g), chars))
    batches = []
    for i in range(0, n_utts, batch_size):
        chunk = utts[i:i + batch_size]
        spec = nn.utils.rnn.pad_sequence([u[0] for u in chunk])
        text = nn.utils.rnn.pad_sequence([u[1] for u in chunk])
        spec_lens = torch.tensor([len(u[0]) for u in chunk])
        text_lens = torch.tensor([len(u[1]) for u in chunk])
        batches.append((pack_padded_sequence(spec, spec_lens, enforce_sorted=False),
                        pack_padded_sequence(text, text_lens, enforce_sorted=False)))
    return batches


def train():
    torch.manual_seed(0)
    device = torch.device("cpu")
    train_loader = make_loader(480, 32, seed=0)
    valid_loader = make_loader(96, 32, seed=1)
    model = CTCModel(N_MELS, nhidden_rnn=32, nlayers_rnn=1, dropout=0.1).to(device)
    baseloss = nn.CTCLoss(blank=BLANK_ID, reduction="mean", zero_infinity=True)
    loss = lambda *params: baseloss(*wrap_ctc_args(*params))
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    metrics = {"CTC": loss}
    num_epochs = 5
    for e in range(num_epochs):
        train_metrics = ftrain(model, train_loader, loss, optimizer, device, metrics, num_epoch=e)
        valid_metrics = ftest(model, valid_loader, device, metrics)
        print(f"[{e}/{num_epochs}] train CTC: {train_metrics['CTC']:.3f}  valid CTC: {valid_metrics['CTC']:.3f}")


if __name__ == "__main__":
    train()
