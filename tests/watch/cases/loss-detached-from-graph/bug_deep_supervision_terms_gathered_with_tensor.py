"""A deep-supervision loss module: each intermediate head of a denoiser is scored against the clean
signal, and the per-stage errors are gathered with torch.tensor([...]) before being weighted into the
loss. torch.tensor copies the values out of the graph: the auxiliary terms show in the loss but send
no gradient, so the early stages and their heads are trained by the final head's error alone."""
import torch
from torch import nn


class StagedDenoiser(nn.Module):
    def __init__(self, dim=24, stages=3):
        super().__init__()
        self.stages = nn.ModuleList(nn.Sequential(nn.Linear(dim, dim), nn.Tanh()) for _ in range(stages))
        self.heads = nn.ModuleList(nn.Linear(dim, dim) for _ in range(stages))

    def forward(self, x):
        outputs, h = [], x
        for stage, head in zip(self.stages, self.heads):
            h = stage(h)
            outputs.append(head(h))
        return outputs


class DeepSupervisionLoss(nn.Module):
    """Final-head error plus the weighted mean of the intermediate heads' errors."""

    def __init__(self, aux_weight=0.4):
        super().__init__()
        self.aux_weight = aux_weight

    @staticmethod
    def error(pred, clean):
        return (pred - clean).pow(2).mean()

    def forward(self, outputs, clean):
        final = self.error(outputs[-1], clean)
        aux = torch.tensor([self.error(o, clean) for o in outputs[:-1]])
        return final + self.aux_weight * aux.mean(), {"final": final.item(), "aux": aux.mean().item()}


class Trainer:
    def __init__(self, model, criterion, lr=3e-3):
        self.model, self.criterion = model, criterion
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def fit(self, noisy, clean, epochs=3, batch=32):
        for epoch in range(epochs):
            for i in range(0, len(noisy), batch):
                loss, parts = self.criterion(self.model(noisy[i:i + batch]), clean[i:i + batch])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} final {parts['final']:.4f} aux {parts['aux']:.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    clean = torch.sin(torch.linspace(0, 6.28, 24) * torch.randint(1, 4, (640, 1), generator=g))
    noisy = clean + 0.3 * torch.randn(clean.shape, generator=g)
    Trainer(StagedDenoiser(), DeepSupervisionLoss()).fit(noisy, clean)


if __name__ == "__main__":
    main()
