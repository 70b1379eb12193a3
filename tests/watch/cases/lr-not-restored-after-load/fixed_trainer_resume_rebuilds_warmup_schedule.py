"""The fixed twin of bug_trainer_resume_rebuilds_warmup_schedule.py: load_checkpoint() keeps the
scheduler built in __init__ (before the optimizer's state is loaded) and loads its state as well,
so the resumed run continues the decay at the step where the first job stopped."""
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

WARMUP, TOTAL = 10, 400


def build_scheduler(optimizer):
    def factor(step):
        if step < WARMUP:
            return step / WARMUP
        return max(0.0, (TOTAL - step) / (TOTAL - WARMUP))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class TextClassifier(nn.Module):
    def __init__(self, vocab=200, dim=32, classes=4):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.head = nn.Sequential(nn.Linear(dim, 64), nn.GELU(), nn.Linear(64, classes))

    def forward(self, tokens):
        return self.head(self.embed(tokens))


class Trainer:
    def __init__(self, loader, checkpoint_path):
        self.loader, self.path = loader, checkpoint_path
        self.model = TextClassifier()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01)
        self.scheduler = build_scheduler(self.optimizer)
        self.step = 0

    def save_checkpoint(self):
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(), "step": self.step}, self.path)

    def load_checkpoint(self):
        ckpt = torch.load(self.path)
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.step = ckpt["step"]

    def train(self, max_steps, save_every=20):
        while self.step < max_steps:
            for tokens, labels in self.loader:
                loss = nn.functional.cross_entropy(self.model(tokens), labels)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()
                self.step += 1
                if self.step % save_every == 0:
                    self.save_checkpoint()
                if self.step >= max_steps:
                    return


def make_loader(seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 200, (640, 12), generator=g)
    labels = (tokens[:, :3] % 4).mode(dim=1).values
    return DataLoader(TensorDataset(tokens, labels), batch_size=32, shuffle=True, generator=g)


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "last.pt")
        Trainer(make_loader(0), path).train(max_steps=20)        # the first job, preempted at step 20
        resumed = Trainer(make_loader(1), path)
        resumed.load_checkpoint()
        resumed.train(max_steps=80)                               # the resumed job
        print(f"resumed to step {resumed.step}, lr {resumed.optimizer.param_groups[0]['lr']:.2e}")


if __name__ == "__main__":
    main()
