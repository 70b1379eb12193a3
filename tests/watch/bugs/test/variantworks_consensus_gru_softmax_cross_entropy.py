"""A consensus caller for sequencing pileups: a neural-module-style ConsensusRNN (two-layer
bidirectional GRU, batch first, then a Linear classifier applied at every window position) reads
summary pileup windows shaped (batch, width, channels) and predicts one of five bases (A, C, G, T,
gap) per position. A train() function wires a shuffled loader, a sequence cross-entropy loss
module that flattens (batch, width, classes) logits, Adam at lr 1e-3 and a loss/accuracy logger.
The network's forward ends in F.softmax(dim=2) and returns probabilities, which the cross-entropy
loss then treats as logits and softmaxes a second time, so the loss can never fall far and the
gradients reaching the GRU are squashed.

Thread: https://github.com/NVIDIA/VariantWorks/pull/134
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_BASES = 5  # A, C, G, T, gap


class ConsensusRNN(nn.Module):
    def __init__(self, sequence_length, input_feature_size, num_output_logits):
        super().__init__()
        self.sequence_length = sequence_length
        self.gru = nn.GRU(input_feature_size, 128, 2, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(2 * 128, num_output_logits)

    def forward(self, encoding):
        encoding, _ = self.gru(encoding)
        encoding = self.classifier(encoding)
        return F.softmax(encoding, dim=2)  # probabilities along the class dimension


class SequenceCrossEntropy(nn.Module):
    """Cross-entropy over per-position logits shaped (batch, width, classes)."""

    def forward(self, logits, labels):
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))


def categorical_accuracy(labels, output):
    return (output.argmax(-1) == labels).float().mean().item()


def pileup_windows(n, width, seed):
    """Per position: read counts for each base on the forward and reverse strand (10 channels),
    drawn around the true base with sequencing errors and varying coverage."""
    g = torch.Generator().manual_seed(seed)
    truth = torch.randint(0, N_BASES, (n, width), generator=g)
    depth = torch.randint(4, 30, (n, width, 1), generator=g).float()
    err = 0.25 + 0.15 * torch.rand(n, width, 1, generator=g)
    probs = F.one_hot(truth, N_BASES).float() * (1 - err) + err / N_BASES
    fwd = probs * depth * torch.rand(n, width, 1, generator=g)
    rev = probs * depth - fwd
    feats = torch.cat([fwd, rev], dim=-1)
    feats = feats + 0.8 * torch.randn(feats.shape, generator=g) * depth.sqrt()
    return TensorDataset((feats / 30.0).clamp_min(0), truth)


def create_model():
    return ConsensusRNN(sequence_length=32, input_feature_size=10, num_output_logits=N_BASES)


def train(epochs=1, log_every=10):
    torch.manual_seed(0)
    model = create_model()
    loader = DataLoader(pileup_windows(2080, 32, seed=0), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    loss_fn = SequenceCrossEntropy()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    step = 0
    for _ in range(epochs):
        for encoding, labels in loader:
            out = model(encoding)
            loss = loss_fn(out, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % log_every == 0:
                print(f"step {step} train loss {loss.item():.4f} "
                      f"train acc {categorical_accuracy(labels, out.detach()):.3f}")
    model.eval()
    encoding, labels = pileup_windows(256, 32, seed=1).tensors
    with torch.no_grad():
        out = model(encoding)
    print(f"eval loss {loss_fn(out, labels).item():.4f} eval acc {categorical_accuracy(labels, out):.3f}")


if __name__ == "__main__":
    train()
