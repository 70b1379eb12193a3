"""An emulator in the style of a spherical Fourier neural operator: a big-skip residual of the input,
a pointwise MLP encoder to the embedding, a learned position embedding, Fourier filter blocks,
and a pointwise decoder, with a `checkpointing` level that wraps the encoder and decoder (level
>= 1) and the blocks (level >= 3) in torch.utils.checkpoint. A Stepper with train_on_batch()
predicts the next state of the gridded fields, and an Optimization object owns AdamW,
accumulate_loss() and step_weights(). The run uses checkpointing=1 to save memory. The checkpoint
calls are the reentrant variant (what checkpoint() without use_reentrant selected), and the
encoder's only input is the data tensor, which does not require grad: the checkpointed encoder's
output is detached from the graph, its weights never get a gradient and stay at their random
initialisation for the whole run while the rest of the network trains around them.

Thread: https://github.com/ai2cm/ace/pull/1493
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

N_LAT, N_LON, IN_CHANS, EMBED = 16, 32, 3, 32


class SpectralFilterLayer(nn.Module):
    def __init__(self, dim, modes_lat=6, modes_lon=8):
        super().__init__()
        self.modes_lat, self.modes_lon = modes_lat, modes_lon
        self.weight = nn.Parameter(0.1 * torch.randn(dim, modes_lat, modes_lon, 2))

    def forward(self, x):
        xf = torch.fft.rfft2(x, norm="ortho")
        out = torch.zeros_like(xf)
        w = torch.view_as_complex(self.weight)
        out[:, :, :self.modes_lat, :self.modes_lon] = xf[:, :, :self.modes_lat, :self.modes_lon] * w
        return torch.fft.irfft2(out, s=x.shape[-2:], norm="ortho")


class FourierNeuralOperatorBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm0, self.norm1 = nn.GroupNorm(1, dim), nn.GroupNorm(1, dim)
        self.filter = SpectralFilterLayer(dim)
        self.mlp = nn.Sequential(nn.Conv2d(dim, 2 * dim, 1), nn.GELU(), nn.Conv2d(2 * dim, dim, 1))

    def forward(self, x):
        x = x + self.filter(self.norm0(x))
        return x + self.mlp(self.norm1(x))


class SphericalFourierNeuralOperatorNet(nn.Module):
    def __init__(self, in_chans=IN_CHANS, out_chans=IN_CHANS, embed_dim=EMBED, num_layers=3, checkpointing=0):
        super().__init__()
        self.checkpointing = checkpointing
        self.encoder = nn.Sequential(nn.Conv2d(in_chans, embed_dim, 1), nn.GELU(),
                                     nn.Conv2d(embed_dim, embed_dim, 1, bias=False))
        self.pos_embed = nn.Parameter(torch.zeros(1, embed_dim, N_LAT, N_LON))
        self.blocks = nn.ModuleList(FourierNeuralOperatorBlock(embed_dim) for _ in range(num_layers))
        self.decoder = nn.Sequential(nn.Conv2d(embed_dim + in_chans, embed_dim, 1), nn.GELU(),
                                     nn.Conv2d(embed_dim, out_chans, 1, bias=False))

    def forward(self, x):
        residual = x
        if self.checkpointing >= 1:
            x = checkpoint(self.encoder, x, use_reentrant=True)
        else:
            x = self.encoder(x)
        x = x + self.pos_embed
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=True) if self.checkpointing >= 3 else blk(x)
        x = torch.cat((x, residual), dim=1)
        if self.checkpointing >= 1:
            return checkpoint(self.decoder, x, use_reentrant=True)
        return self.decoder(x)


class Optimization:
    def __init__(self, parameters, lr):
        self.optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=0.01)

    def accumulate_loss(self, loss):
        loss.backward()

    def step_weights(self):
        self.optimizer.step()
        self.optimizer.zero_grad()


class Stepper:
    def __init__(self, module):
        self.module = module

    def train_on_batch(self, data, optimization):
        state, next_state = data
        prediction = self.module(state)
        loss = F.mse_loss(prediction, next_state)
        optimization.accumulate_loss(loss)
        optimization.step_weights()
        return loss.detach()


def advance(state):
    """Ground truth: zonal advection, a meridional smoothing and a nonlinear coupling of the fields."""
    adv = torch.roll(state, shifts=(0, 2), dims=(2, 3))
    smooth = 0.5 * adv + 0.25 * (torch.roll(adv, 1, 2) + torch.roll(adv, -1, 2))
    a, b, c = smooth[:, 0:1], smooth[:, 1:2], smooth[:, 2:3]
    return torch.cat([a + 0.3 * torch.tanh(b * c), b - 0.2 * a * c, 0.9 * c + 0.1 * a ** 2], dim=1)


def make_batches(n_batches, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    lat = torch.linspace(-1.5, 1.5, N_LAT).view(1, 1, N_LAT, 1)
    lon = torch.linspace(0, 6.283, N_LON + 1)[:-1].view(1, 1, 1, N_LON)
    out = []
    for _ in range(n_batches):
        k = torch.randint(1, 4, (batch_size, IN_CHANS, 1, 1), generator=g)
        phase = 6.283 * torch.rand(batch_size, IN_CHANS, 1, 1, generator=g)
        amp = 0.5 + torch.rand(batch_size, IN_CHANS, 1, 1, generator=g)
        state = amp * torch.cos(k * lon + phase) * torch.cos(lat) + 0.1 * torch.randn(
            batch_size, IN_CHANS, N_LAT, N_LON, generator=g)
        out.append((state, advance(state)))
    return out


def main():
    torch.manual_seed(0)
    module = SphericalFourierNeuralOperatorNet(checkpointing=1)
    stepper, optimization = Stepper(module), Optimization(module.parameters(), lr=2e-3)
    train, valid = make_batches(24, 16, seed=0), make_batches(4, 32, seed=1)
    for epoch in range(3):
        module.train()
        for i, batch in enumerate(train):
            loss = stepper.train_on_batch(batch, optimization)
            if i % 10 == 0:
                print(f"epoch {epoch} batch {i} train loss {loss.item():.5f}")
        module.eval()
        with torch.no_grad():
            val = sum(F.mse_loss(module(s), t).item() for s, t in valid) / len(valid)
        print(f"epoch {epoch} validation loss {val:.5f}")


if __name__ == "__main__":
    main()
