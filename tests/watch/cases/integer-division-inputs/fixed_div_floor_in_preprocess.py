"""The same CNN and Trainer whose preprocess() converts the permuted frames to float32 first and
then divides: every intensity survives as a value in [0, 1]."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    @staticmethod
    def preprocess(frames):
        chw = frames.permute(0, 3, 1, 2)
        return chw.to(torch.float32) / 255

    def epoch(self):
        for frames, target in self.loader:
            loss = nn.functional.cross_entropy(self.model(self.preprocess(frames)), target)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    frames = (torch.rand(1024, 16, 16, 3, generator=g) * 280).clamp(0, 255).to(torch.uint8)
    target = (frames[..., 0].float().mean((1, 2)) > frames[..., 2].float().mean((1, 2))).long()
    loader = DataLoader(TensorDataset(frames, target), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 2))
    trainer = Trainer(model, loader)
    for _ in range(2):
        loss = trainer.epoch()
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
