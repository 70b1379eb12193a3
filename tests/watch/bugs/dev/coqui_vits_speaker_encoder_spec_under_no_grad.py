"""A VITS / YourTTS style generator step with the speaker consistency loss (SCL): the
generated waveform segment and the ground-truth segment are concatenated and passed through a
frozen, pretrained ResNet-like speaker encoder, and the negative cosine similarity of the two
embeddings, times spk_encoder_loss_alpha, is added to the generator loss next to the mel L1 term.
The speaker encoder's forward computes its input features (STFT magnitude, log, instance norm)
inside `with torch.no_grad()` before the conv layers. That is harmless for the ground-truth half,
but it also cuts the graph for the synthesized half: the SCL term is computed and logged, yet no
gradient from it reaches the TTS generator, so the speaker-similarity objective has no effect on
training.

Thread: https://github.com/coqui-ai/TTS/pull/2364
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_SPEAKERS = 6
SEG = 512


class ResNetSpeakerEncoder(nn.Module):
    def __init__(self, n_fft=64, hop=16, proj_dim=32):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.instancenorm = nn.InstanceNorm1d(n_fft // 2 + 1)
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(8 * (n_fft // 2 + 1), proj_dim)
        self.use_torch_spec = True
        self.log_input = True

    def torch_spec(self, x):
        return torch.stft(x, self.n_fft, self.hop, window=torch.hann_window(self.n_fft), return_complex=True).abs()

    def forward(self, x, l2_norm=False):
        with torch.no_grad():
            x = x.squeeze(1)
            if self.use_torch_spec:
                x = self.torch_spec(x)
            if self.log_input:
                x = (x + 1e-6).log()
            x = self.instancenorm(x).unsqueeze(1)
        x = torch.relu(self.conv1(x))
        x = self.layer1(x)
        x = x.mean(-1).flatten(1)
        x = self.fc(x)
        if l2_norm:
            x = F.normalize(x, p=2, dim=1)
        return x


class Vits(nn.Module):
    """Tiny stand-in: text ids + speaker id -> waveform segment."""

    def __init__(self, n_text=12, d=32):
        super().__init__()
        self.text_emb = nn.Embedding(n_text, d)
        self.emb_g = nn.Embedding(N_SPEAKERS, d)
        self.dec = nn.Sequential(nn.Linear(2 * d, 128), nn.Tanh(), nn.Linear(128, SEG))

    def forward(self, text, speaker_ids):
        return self.dec(torch.cat([self.text_emb(text).mean(1), self.emb_g(speaker_ids)], -1))


def mel(x):
    return torch.log(torch.stft(x, 64, 16, window=torch.hann_window(64), return_complex=True).abs() + 1e-5)


class VitsGeneratorLoss(nn.Module):
    def __init__(self, mel_loss_alpha=1.0, spk_encoder_loss_alpha=9.0):
        super().__init__()
        self.mel_loss_alpha = mel_loss_alpha
        self.spk_encoder_loss_alpha = spk_encoder_loss_alpha

    @staticmethod
    def cosine_similarity_loss(gt_spk_emb, syn_spk_emb):
        return -F.cosine_similarity(gt_spk_emb, syn_spk_emb).mean()

    def forward(self, mel_slice, mel_slice_hat, use_speaker_encoder_as_loss=False, gt_spk_emb=None, syn_spk_emb=None):
        return_dict = {}
        loss_mel = F.l1_loss(mel_slice, mel_slice_hat) * self.mel_loss_alpha
        loss = loss_mel
        if use_speaker_encoder_as_loss:
            loss_se = self.cosine_similarity_loss(gt_spk_emb, syn_spk_emb) * self.spk_encoder_loss_alpha
            loss = loss + loss_se
            return_dict["loss_spk_encoder"] = loss_se
        return_dict["loss_mel"] = loss_mel
        return_dict["loss"] = loss
        return return_dict


def make_data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    f0 = torch.linspace(0.04, 0.3, N_SPEAKERS)
    spk = torch.randint(0, N_SPEAKERS, (n,), generator=g)
    text = torch.randint(0, 12, (n, 6), generator=g)
    t = torch.arange(SEG).float()
    phase = 2 * torch.pi * torch.rand(n, 1, generator=g)
    amp = 0.3 + 0.05 * text.float().mean(1, keepdim=True)
    wav = amp * torch.sin(2 * torch.pi * f0[spk].unsqueeze(1) * t + phase)
    wav = wav + 0.3 * amp * torch.sin(4 * torch.pi * f0[spk].unsqueeze(1) * t + 2 * phase)
    return TensorDataset(text, spk, wav + 0.02 * torch.randn(n, SEG, generator=g))


def main():
    torch.manual_seed(0)
    loader = DataLoader(make_data(512), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    model = Vits()
    speaker_encoder = ResNetSpeakerEncoder()  # stands in for the pretrained checkpoint
    speaker_encoder.eval()
    for p in speaker_encoder.parameters():
        p.requires_grad_(False)
    criterion = VitsGeneratorLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.8, 0.99))
    step = 0
    for epoch in range(5):
        for text, speaker_ids, wav_seg in loader:
            o = model(text, speaker_ids)
            wavs_batch = torch.cat((wav_seg, o), dim=0)
            pred_embs = speaker_encoder.forward(wavs_batch, l2_norm=True)
            gt_spk_emb, syn_spk_emb = torch.chunk(pred_embs, 2, dim=0)
            loss_dict = criterion(mel(wav_seg), mel(o), use_speaker_encoder_as_loss=True,
                                  gt_spk_emb=gt_spk_emb, syn_spk_emb=syn_spk_emb)
            optimizer.zero_grad()
            loss_dict["loss"].backward()
            optimizer.step()
            step += 1
            if step % 32 == 0:
                print(f"step {step}: loss_mel {loss_dict['loss_mel'].item():.4f} "
                      f"loss_spk_encoder {loss_dict['loss_spk_encoder'].item():.4f}")


if __name__ == "__main__":
    main()
