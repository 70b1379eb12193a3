"""A keyword-spotting Executor class whose train(model, optimizer, data_loader, device, writer, args)
method does forward, loss, backward, clips the gradient norm and steps only when the norm is
finite, but never calls optimizer.zero_grad(), so gradients pile up from batch to batch.

Thread: https://github.com/wenet-e2e/wekws/pull/73
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class KWSModel(nn.Module):
    def __init__(self, idim=20, hdim=32, num_keywords=3):
        super().__init__()
        self.preprocessing = nn.Linear(idim, hdim)
        self.backbone = nn.GRU(hdim, hdim, batch_first=True)
        self.classifier = nn.Linear(hdim, num_keywords)

    def forward(self, feats):
        x, _ = self.backbone(torch.relu(self.preprocessing(feats)))
        return self.classifier(x)


def max_pooling_loss(logits, target):
    frame_scores = logits.max(dim=1).values  # the most confident frame decides the utterance
    return F.cross_entropy(frame_scores, target)


class Executor:
    def __init__(self):
        self.step = 0

    def train(self, model, optimizer, data_loader, device, writer, args):
        model.train()
        clip = args.get("grad_clip", 5.0)
        log_interval = args.get("log_interval", 20)
        for batch_idx, (feats, target) in enumerate(data_loader):
            feats, target = feats.to(device), target.to(device)
            logits = model(feats)
            loss = max_pooling_loss(logits, target)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            if batch_idx % log_interval == 0:
                writer.append((self.step, loss.item()))
                print(f"batch {batch_idx} loss {loss.item():.4f} grad_norm {grad_norm.item():.2f}")
            self.step += 1


def kws_data(n=1024, frames=30, idim=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, 3, (n,), generator=g)
    feats = torch.randn(n, frames, idim, generator=g)
    pattern = torch.randn(3, idim, generator=torch.Generator().manual_seed(11))
    start = torch.randint(0, frames - 5, (n,), generator=g)
    for i in range(n):
        feats[i, start[i]:start[i] + 5] += 1.5 * pattern[target[i]]
    return TensorDataset(feats, target)


def main():
    torch.manual_seed(0)
    model = KWSModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(kws_data(), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    executor, writer = Executor(), []
    for _epoch in range(3):
        executor.train(model, optimizer, loader, "cpu", writer, {"grad_clip": 5.0, "log_interval": 16})


if __name__ == "__main__":
    main()
