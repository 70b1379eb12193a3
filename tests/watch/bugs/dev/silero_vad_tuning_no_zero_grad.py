"""A voice-activity-detector fine-tuning script: a frozen scripted model supplies the STFT front
end and the encoder, a copy of its decoder (LSTMCell state carried from window to window, then
dropout, ReLU, a 1x1 Conv1d and a sigmoid) is the only thing trained, with Adam and a per-window
BCELoss(reduction='none') weighted by a mask that down-weights non-speech windows. The
train(config, loader, jit_model, decoder, criterion, optimizer, device) function runs every clip
window by window, then calls loss.backward() and optimizer.step(), but never
optimizer.zero_grad(), so each step applies the sum of all gradients since the start of training.

Thread: https://github.com/snakers4/silero-vad/pull/699
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Config:
    num_samples = 64          # samples per window
    context_size = 8          # samples of left context prepended to each window
    noise_loss = 0.5          # weight of the loss on non-speech windows
    learning_rate = 5e-4
    batch_size = 16
    num_epochs = 4
    device = "cpu"


class STFTLike(nn.Module):
    def __init__(self, n_fft=72, n_bins=24):
        super().__init__()
        self.proj = nn.Conv1d(1, n_bins, kernel_size=n_fft, stride=n_fft)

    def forward(self, x):
        return self.proj(x.unsqueeze(1)).abs()


class EncoderLike(nn.Module):
    def __init__(self, n_bins=24, dim=32):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(n_bins, dim, 1), nn.ReLU(), nn.Conv1d(dim, dim, 1), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class VADDecoder(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.rnn = nn.LSTMCell(dim, dim)
        self.decoder = nn.Sequential(nn.Dropout(0.1), nn.ReLU(), nn.Conv1d(dim, 1, kernel_size=1), nn.Sigmoid())

    def forward(self, x, state=torch.zeros(0)):
        x = x.squeeze(-1)
        h, c = self.rnn(x, (state[0], state[1])) if len(state) else self.rnn(x)
        state = torch.stack([h, c])
        return self.decoder(h.unsqueeze(-1)), state


class ScriptedVAD(nn.Module):
    """Stands in for the loaded scripted model: front end, encoder and a decoder."""

    def __init__(self):
        super().__init__()
        self.stft = STFTLike()
        self.encoder = EncoderLike()
        self.decoder = VADDecoder()


class VADClips(Dataset):
    def __init__(self, n_clips, n_windows, config, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(n_windows * config.num_samples, dtype=torch.float32)
        self.items = []
        for _ in range(n_clips):
            speech = torch.zeros(n_windows)
            start = int(torch.randint(0, n_windows // 2, (1,), generator=g))
            length = int(torch.randint(3, n_windows // 2, (1,), generator=g))
            speech[start:start + length] = 1.0
            freq = 0.2 + 0.2 * torch.rand(1, generator=g)
            tone = torch.sin(freq * t) * speech.repeat_interleave(config.num_samples)
            wav = tone + 0.3 * torch.randn(t.shape, generator=g)
            mask = torch.where(speech > 0, torch.ones(n_windows), torch.full((n_windows,), config.noise_loss))
            self.items.append((wav, speech, mask))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train(config, loader, jit_model, decoder, criterion, optimizer, device):
    losses = AverageMeter()
    decoder.train()
    context_size, num_samples = config.context_size, config.num_samples
    with torch.enable_grad():
        for x, targets, masks in loader:
            x, targets, masks = x.to(device), targets.to(device), masks.to(device)
            x = nn.functional.pad(x, (context_size, 0))
            outs = []
            state = torch.zeros(0)
            for i in range(context_size, x.shape[1], num_samples):
                chunk = x[:, i - context_size:i + num_samples]
                out = jit_model.encoder(jit_model.stft(chunk))
                out, state = decoder(out, state)
                outs.append(out)
            stacked = torch.cat(outs, dim=2).squeeze(1)
            loss = criterion(stacked, targets)
            loss = (loss * masks).mean()
            loss.backward()
            optimizer.step()
            losses.update(loss.item(), masks.numel())
    return losses.avg


def validate(config, loader, jit_model, decoder, criterion, device):
    decoder.eval()
    losses, correct, total = AverageMeter(), 0, 0
    with torch.no_grad():
        for x, targets, masks in loader:
            x = nn.functional.pad(x, (config.context_size, 0))
            outs, state = [], torch.zeros(0)
            for i in range(config.context_size, x.shape[1], config.num_samples):
                out = jit_model.encoder(jit_model.stft(x[:, i - config.context_size:i + config.num_samples]))
                out, state = decoder(out, state)
                outs.append(out)
            stacked = torch.cat(outs, dim=2).squeeze(1)
            losses.update((criterion(stacked, targets) * masks).mean().item(), masks.numel())
            correct += ((stacked > 0.5).float() == targets).sum().item()
            total += targets.numel()
    return losses.avg, correct / total


def main():
    torch.manual_seed(0)
    config = Config()
    jit_model = ScriptedVAD().eval()
    for p in jit_model.parameters():
        p.requires_grad_(False)
    train_loader = DataLoader(VADClips(320, 24, config, seed=1), batch_size=config.batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(VADClips(64, 24, config, seed=2), batch_size=config.batch_size)
    decoder = VADDecoder().to(config.device)
    decoder.load_state_dict(jit_model.decoder.state_dict())
    decoder.train()
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, decoder.parameters()), lr=config.learning_rate)
    criterion = nn.BCELoss(reduction="none")
    for epoch in range(config.num_epochs):
        train_loss = train(config, train_loader, jit_model, decoder, criterion, optimizer, config.device)
        val_loss, val_acc = validate(config, val_loader, jit_model, decoder, criterion, config.device)
        print(f"epoch {epoch + 1}: train loss {train_loss:.4f} val loss {val_loss:.4f} val window acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
