"""Fixed twin of bug_backbone_loaded_from_compiled_model: setup() strips torch.compile's "_orig_mod."
prefix before loading, so every encoder weight is loaded."""
import torch
import torch.nn.functional as F
from torch import nn


def encoder():
    return nn.Sequential(nn.Conv1d(4, 16, 5, padding=2), nn.GELU(), nn.Conv1d(16, 32, 5, padding=2), nn.GELU())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = encoder()
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.encoder(x).mean(-1))


class Trainer:
    def __init__(self, pretrained_state):
        self.model = Model()
        self.pretrained_state = pretrained_state
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)

    def setup(self):
        state = {k.removeprefix("_orig_mod."): v for k, v in self.pretrained_state.items()}
        self.model.encoder.load_state_dict(state, strict=False)

    def fit(self, steps, g):
        for step in range(steps):
            x = torch.randn(16, 4, 64, generator=g)
            y = (x[:, 0].mean(-1) > 0).long() + (x[:, 1].mean(-1) > 0).long()
            loss = F.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if step % 20 == 0:
                print(f"step {step} loss {loss.item():.3f}")


def main():
    torch.manual_seed(1)
    state = {"_orig_mod." + k: v for k, v in encoder().state_dict().items()}  # saved from torch.compile(encoder)
    torch.manual_seed(0)
    trainer = Trainer(state)
    trainer.setup()
    trainer.fit(60, torch.Generator().manual_seed(0))


if __name__ == "__main__":
    main()
