"""A speaker-embedding encoder trained by a Trainer class with a batch-hard triplet loss over the
whole batch's distance matrix. The matrix comes from torch.linalg.vector_norm, whose backward
returns 0 at a zero vector, so the zero diagonal (each clip with itself) leaves the gradients
finite and the encoder trains."""
import torch
import torch.nn.functional as F
from torch import nn


class SpeakerEncoder(nn.Module):
    def __init__(self, n_mels=20, dim=16):
        super().__init__()
        self.frame = nn.Sequential(nn.Linear(n_mels, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, clips):                  # clips: (batch, frames, n_mels)
        return self.frame(clips).mean(1)       # average over frames


def pairwise_distances(e):
    return torch.linalg.vector_norm(e[:, None, :] - e[None, :, :], dim=-1)


def batch_hard_triplet_loss(emb, speakers, margin=0.5):
    dist = pairwise_distances(emb)
    same = speakers[:, None] == speakers[None, :]
    eye = torch.eye(len(speakers), dtype=torch.bool)
    hardest_pos = (dist * (same & ~eye)).max(1).values
    hardest_neg = dist.masked_fill(same, float("inf")).min(1).values
    return F.relu(hardest_pos - hardest_neg + margin).mean()


class Trainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def train_step(self, clips, speakers):
        self.model.train()
        loss = batch_hard_triplet_loss(self.model(clips), speakers)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def validate(self, clips, speakers):
        self.model.eval()
        emb = F.normalize(self.model(clips), dim=-1)
        nearest = (emb @ emb.T).fill_diagonal_(-2).argmax(1)
        return (speakers[nearest] == speakers).float().mean().item()


def make_clips(n_speakers=8, per_speaker=8, frames=10, n_mels=20, g=None):
    voice = torch.randn(n_speakers, n_mels, generator=g)
    speakers = torch.arange(n_speakers).repeat_interleave(per_speaker)
    clips = voice[speakers][:, None, :] + 1.5 * torch.randn(len(speakers), frames, n_mels, generator=g)
    return clips, speakers


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_clips, train_speakers = make_clips(g=g)
    val_clips, val_speakers = make_clips(g=g)
    trainer = Trainer(SpeakerEncoder())
    for step in range(60):
        perm = torch.randperm(len(train_speakers), generator=g)[:32]
        loss = trainer.train_step(train_clips[perm], train_speakers[perm])
    print(f"last loss {loss:.3f}, validation nearest-neighbour accuracy {trainer.validate(val_clips, val_speakers):.2f}")


if __name__ == "__main__":
    main()
