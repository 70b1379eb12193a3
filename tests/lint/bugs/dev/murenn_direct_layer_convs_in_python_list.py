"""
Shape: a multiresolution layer (nn.Module) builds, in a `for j in range(J)` loop in `__init__`, one
wavelet downsampling module and one depthwise Conv1d filter bank per scale, appends them to
`self.down` and `self.conv1d`, and indexes those per scale in `forward`; layers are stacked by
calling the constructor repeatedly with the previous output's channel count.
Bug: `self.down` and `self.conv1d` are plain Python lists, so the learnable Conv1d filters are not
registered: they are missing from `.parameters()`, are not moved by `.to()` and are not saved in
the state_dict.
Thread: https://github.com/kymatio/murenn/issues/42
"""
import torch
import murenn


class MultiResDirect(torch.nn.Module):
    def __init__(self, *, J, Q, T, in_channels, padding_mode="symmetric"):
        super(MultiResDirect, self).__init__()
        self.Q, self.C = Q, in_channels
        self.down = []
        self.conv1d = []
        self.dtcwt = murenn.DTCWT(J=J, padding_mode=padding_mode)

        for level in range(J):
            pool_j = murenn.DTCWT(J=J - level, padding_mode=padding_mode, skip_hps=True)
            self.down.append(pool_j)

            filt_j = torch.nn.Conv1d(
                in_channels, Q * in_channels, T,
                padding="same", groups=in_channels, bias=False,
            )
            torch.nn.init.normal_(filt_j.weight)
            self.conv1d.append(filt_j)

    def forward(self, signal):
        x = signal
        assert x.shape[1] == self.C
        _, bands = self.dtcwt(x)
        outs = []
        for j, (pool, filt) in enumerate(zip(self.down, self.conv1d)):
            re = filt(bands[j].real)
            im = filt(bands[j].imag)
            energy = re ** 2 + im ** 2
            y_j, _ = pool(energy)
            b, _, n = y_j.shape
            outs.append(y_j.view(b, self.C, self.Q, n))
        return torch.stack(outs, dim=3)


def build_stack(J, Q, T, channels, depth=3):
    layers = []
    c = channels
    for _ in range(depth):
        layers.append(MultiResDirect(J=J, Q=Q, T=T, in_channels=c))
        c = c * Q * J
    return layers
