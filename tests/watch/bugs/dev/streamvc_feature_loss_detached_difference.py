"""A StreamVC-style voice-conversion GAN. train_streamvc(model, args) builds a multi-scale
waveform discriminator (each scale returns a list of intermediate feature maps plus the final
logits map), AdamW optimizers for the generator (its frozen content encoder excluded) and the
discriminator, and four loss modules: DiscriminatorLoss (hinge), GeneratorLoss, FeatureLoss and
a multi-resolution spectral ReconstructionLoss, all masked by per-utterance length ratios.
Each step trains the discriminator on the detached generated audio, then the generator on
lambda_adversarial * adversarial + lambda_feature * feature + lambda_reconstruction *
reconstruction, and logs every term.

The bug: FeatureLoss.forward accumulates, for every scale and every intermediate layer,
masked_mean_from_ratios(torch.abs(fake[i][j] - real[i][j]).detach(), mask_ratio) into a
torch.tensor(0.) accumulator. The .detach() was meant for the real features only, but it
wraps the whole difference, so the feature-matching term is a constant with no grad_fn: it
is logged and weighted (lambda_feature = 100), yet the generator gets no gradient from it
and trains on the adversarial and reconstruction terms alone.

Thread: https://github.com/yuval-reshef/StreamVC/issues/3
"""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

SAMPLES = 1024
N_SPK = 4


def masked_mean_from_ratios(tensor, mask_ratio):
    _, _, samples = tensor.shape
    lengths = torch.floor(mask_ratio * samples).to(torch.int32)
    mask = (torch.arange(samples) < lengths.unsqueeze(1)).unsqueeze(1)
    return torch.where(mask, tensor, 0).sum() / lengths.sum()


class ContentEncoder(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, d, 16, stride=8, padding=4), nn.GELU(), nn.Conv1d(d, d, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class Decoder(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.spk = nn.Embedding(N_SPK, d)
        self.net = nn.Sequential(nn.Conv1d(2 * d, 32, 3, padding=1), nn.GELU(),
                                 nn.ConvTranspose1d(32, 16, 16, stride=8, padding=4), nn.GELU(),
                                 nn.Conv1d(16, 1, 7, padding=3), nn.Tanh())

    def forward(self, content, speaker):
        s = self.spk(speaker).unsqueeze(-1).expand(-1, -1, content.shape[-1])
        return self.net(torch.cat([content, s], 1))


class StreamVC(nn.Module):
    def __init__(self):
        super().__init__()
        self.content_encoder = ContentEncoder()
        self.decoder = Decoder()

    def forward(self, source, speaker):
        return self.decoder(self.content_encoder(source), speaker)


class ScaleDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Sequential(nn.Conv1d(1, 16, 15, padding=7), nn.LeakyReLU(0.2)),
            nn.Sequential(nn.Conv1d(16, 32, 41, stride=4, padding=20, groups=4), nn.LeakyReLU(0.2)),
            nn.Sequential(nn.Conv1d(32, 32, 41, stride=4, padding=20, groups=8), nn.LeakyReLU(0.2)),
            nn.Sequential(nn.Conv1d(32, 32, 5, padding=2), nn.LeakyReLU(0.2)),
            nn.Conv1d(32, 1, 3, padding=1),
        ])

    def forward(self, x):
        feats = []
        for layer in self.layers:
            x = layer(x)
            feats.append(x)
        return feats


class Discriminator(nn.Module):
    def __init__(self, n_blocks=3):
        super().__init__()
        self.blocks = nn.ModuleList([ScaleDiscriminator() for _ in range(n_blocks)])
        self.pool = nn.AvgPool1d(4, stride=2, padding=1, count_include_pad=False)

    def forward(self, x):
        outs = []
        for block in self.blocks:
            outs.append(block(x))
            x = self.pool(x)
        return outs


class DiscriminatorLoss(nn.Module):
    def forward(self, real, fake, mask_ratio):
        loss = torch.tensor(0.)
        for scale in real:
            loss += masked_mean_from_ratios(F.relu(1 - scale[-1]), mask_ratio)
        for scale in fake:
            loss += masked_mean_from_ratios(F.relu(1 + scale[-1]), mask_ratio)
        return loss


class GeneratorLoss(nn.Module):
    def forward(self, fake, mask_ratio):
        loss = torch.tensor(0.)
        for scale in fake:
            loss += -masked_mean_from_ratios(scale[-1], mask_ratio)
        return loss


class FeatureLoss(nn.Module):
    def __init__(self, n_blocks=3, n_layers=4):
        super().__init__()
        self.n_blocks, self.n_layers = n_blocks, n_layers

    def forward(self, real, fake, mask_ratio):
        loss = torch.tensor(0.)
        wt = (1.0 / self.n_blocks) * (4.0 / (self.n_layers + 1))
        for i in range(self.n_blocks):
            for j in range(len(fake[i]) - 1):
                loss += wt * masked_mean_from_ratios(torch.abs(fake[i][j] - real[i][j]).detach(), mask_ratio)
        return loss


class ReconstructionLoss(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, original, generated, mask_ratio):
        loss = torch.tensor(0.)
        for s_exp in range(5, 9):
            s = 2 ** s_exp
            win = torch.hann_window(s)
            o = torch.stft(original.squeeze(1), s, s // 4, window=win, return_complex=True).abs()
            g = torch.stft(generated.squeeze(1), s, s // 4, window=win, return_complex=True).abs()
            l1 = masked_mean_from_ratios(torch.abs(o - g), mask_ratio)
            l2 = torch.sqrt(((torch.log(o + self.eps) - torch.log(g + self.eps)) ** 2).mean(1, keepdim=True) + self.eps)
            loss += l1 + (s / 2) ** 0.5 * masked_mean_from_ratios(l2, mask_ratio)
        return loss


def make_batch(g, batch_size):
    """Source utterance and its rendition by a target speaker (different pitch/timbre)."""
    t = torch.arange(SAMPLES).float()
    speaker = torch.randint(0, N_SPK, (batch_size,), generator=g)
    f0 = 0.01 + 0.02 * torch.rand(batch_size, 1, generator=g)
    env = torch.sigmoid(torch.sin(2 * torch.pi * t / (100 + 300 * torch.rand(batch_size, 1, generator=g))) * 4)
    source = 0.5 * env * torch.sin(2 * torch.pi * f0 * t)
    pitch = 1.0 + 0.25 * speaker.float().unsqueeze(1)
    target = 0.5 * env * (torch.sin(2 * torch.pi * f0 * pitch * t) + 0.3 * torch.sin(4 * torch.pi * f0 * pitch * t))
    lengths = torch.randint(SAMPLES // 2, SAMPLES + 1, (batch_size,), generator=g)
    mask = (torch.arange(SAMPLES) < lengths.unsqueeze(1)).float()
    return (source * mask).unsqueeze(1), (target * mask).unsqueeze(1), speaker, mask


def train_streamvc(streamvc_model, args):
    generator = streamvc_model
    discriminator = Discriminator()
    for param in generator.content_encoder.parameters():
        param.requires_grad = False
    optimizer_generator = torch.optim.AdamW([p for p in generator.parameters() if p.requires_grad],
                                            lr=args.lr, betas=args.betas, weight_decay=args.weight_decay)
    optimizer_discriminator = torch.optim.AdamW(discriminator.parameters(), lr=args.lr,
                                                betas=args.betas, weight_decay=args.weight_decay)
    generator_loss_fn = GeneratorLoss()
    discriminator_loss_fn = DiscriminatorLoss()
    feature_loss_fn = FeatureLoss()
    reconstruction_loss_fn = ReconstructionLoss()

    g = torch.Generator().manual_seed(args.seed)
    costs = []
    global_step = 0
    for epoch in range(args.num_epochs):
        for step in range(args.limit_num_batches):
            source, batch, speaker, mask = make_batch(g, args.batch_size)
            x_pred_t = generator(source, speaker)
            mask_ratio = mask.sum(dim=-1) / mask.shape[-1]

            # discriminator
            discriminator.zero_grad()
            discriminator_fake_detached = discriminator(x_pred_t.detach())
            discriminator_real = discriminator(batch)
            discriminator_loss = discriminator_loss_fn(discriminator_real, discriminator_fake_detached, mask_ratio)
            discriminator_loss.backward()
            optimizer_discriminator.step()

            # generator
            generator.zero_grad()
            discriminator_fake = discriminator(x_pred_t)
            adversarial_loss = generator_loss_fn(discriminator_fake, mask_ratio)
            feature_loss = feature_loss_fn(discriminator_real, discriminator_fake, mask_ratio)
            reconstruction_loss = reconstruction_loss_fn(batch, x_pred_t, mask_ratio)
            losses = (args.lambda_adversarial * adversarial_loss + args.lambda_feature * feature_loss
                      + args.lambda_reconstruction * reconstruction_loss)
            losses.backward()
            optimizer_generator.step()

            costs.append([discriminator_loss.item(), adversarial_loss.item(), feature_loss.item(),
                          reconstruction_loss.item()])
            global_step += 1
            if global_step % args.log_interval == 0:
                m = torch.tensor(costs).mean(0)
                print(f"[{epoch}, {step:4}] disc {m[0]:.3f} adv {m[1]:.3f} feat {m[2]:.4f} rec {m[3]:.3f}")
                costs = []


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(lr=2e-4, betas=(0.5, 0.9), weight_decay=1e-2, num_epochs=3, limit_num_batches=30,
                           batch_size=8, lambda_adversarial=1.0, lambda_feature=100.0, lambda_reconstruction=1.0,
                           log_interval=15, seed=0)
    train_streamvc(StreamVC(), args)


if __name__ == "__main__":
    main()
