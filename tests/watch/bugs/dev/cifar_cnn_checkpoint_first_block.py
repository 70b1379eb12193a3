"""A small CIFAR-style CNN (two conv blocks of conv-ReLU-conv-ReLU-maxpool, dropout after each,
then a linear head) trained with Adam and cross-entropy in a plain epoch loop. To save memory the
user wraps each conv block in torch.utils.checkpoint.checkpoint and moves the dropouts out of the
checkpointed blocks. The call is the reentrant checkpoint (what checkpoint() without use_reentrant
selected), whose output requires grad only if one of its inputs does. The first block's input is
the image batch, which does not, so the output of cnn_block_1 is cut from the graph: neither conv
block gets a gradient (block 2's input comes from block 1), both stay at their random
initialisation, and only the head learns.

Thread: https://discuss.pytorch.org/t/use-of-torch-utils-checkpoint-checkpoint-causes-simple-model-to-diverge/116271
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class CIFAR10Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn_block_1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.dropout_1 = nn.Dropout(0.25)
        self.cnn_block_2 = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                                         nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.dropout_2 = nn.Dropout(0.25)
        self.head = nn.Sequential(nn.Linear(32 * 4 * 4, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))

    def forward(self, X):
        X = checkpoint(self.cnn_block_1, X, use_reentrant=True)
        X = self.dropout_1(X)
        X = checkpoint(self.cnn_block_2, X, use_reentrant=True)
        X = self.dropout_2(X)
        X = torch.flatten(X, 1)
        return self.head(X)


def make_dataset(n, seed):
    """Ten classes, each a fixed colour pattern placed at a random shift, plus noise."""
    g = torch.Generator().manual_seed(seed)
    patterns = torch.randn(10, 3, 6, 6, generator=torch.Generator().manual_seed(7))
    y = torch.randint(0, 10, (n,), generator=g)
    x = 0.3 * torch.randn(n, 3, 16, 16, generator=g)
    for i in range(n):
        r, c = torch.randint(0, 11, (2,), generator=g).tolist()
        x[i, :, r:r + 6, c:c + 6] += patterns[y[i]]
    return x, y


def main():
    torch.manual_seed(0)
    model = CIFAR10Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    x_train, y_train = make_dataset(1536, seed=0)
    x_test, y_test = make_dataset(512, seed=1)
    g = torch.Generator().manual_seed(2)
    step = 0
    for epoch in range(4):
        model.train()
        perm = torch.randperm(len(x_train), generator=g)
        for i in range(0, len(x_train), 64):
            idx = perm[i:i + 64]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} train loss {loss.item():.4f}")
            step += 1
        model.eval()
        with torch.no_grad():
            acc = (model(x_test).argmax(1) == y_test).float().mean().item()
        print(f"epoch {epoch} test accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
