"""A SegNet-style encoder-decoder for semantic segmentation (max-pool indices reused by max-unpool in
the decoder) whose forward() returns both the raw class scores and F.softmax of them. A train()
function with module-level model, criterion and optimizer loops over epochs and batches; the
criterion is nn.CrossEntropyLoss weighted by the inverse class frequency that the dataset reports,
the optimizer is Adam, and zero_grad sits right before the loss is computed.

The loss is computed on the softmaxed tensor instead of the raw scores. CrossEntropyLoss applies
its own log-softmax, so the class probabilities are squashed through a second softmax: every pixel's
loss is bounded away from zero, the gradients are damped, and the segmentation trains slowly and
plateaus high. The fix passes the first output (the scores) to the criterion.

Thread: https://github.com/say4n/pytorch-segnet/issues/5
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 4
NUM_EPOCHS = 20
LEARNING_RATE = 1e-3
BATCH_SIZE = 16


class ShapesSegmentationDataset(Dataset):
    """Images with a coloured square, disc or bar on a noisy background; mask holds class ids."""

    def __init__(self, n=64, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = 0.2 * torch.randn(n, 3, size, size, generator=g)
        self.masks = torch.zeros(n, size, size, dtype=torch.long)
        colours = torch.tensor([[1.0, -0.5, -0.5], [-0.5, 1.0, -0.5], [-0.5, -0.5, 1.0]])
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        for i in range(n):
            cls = int(torch.randint(1, NUM_CLASSES, (1,), generator=g))
            r, c = torch.randint(6, size - 6, (2,), generator=g).tolist()
            if cls == 1:
                region = ((yy - r).abs() <= 5) & ((xx - c).abs() <= 5)
            elif cls == 2:
                region = (yy - r) ** 2 + (xx - c) ** 2 <= 30
            else:
                region = ((yy - r).abs() <= 2) & ((xx - c).abs() <= 10)
            self.masks[i][region] = cls
            self.images[i] += colours[cls - 1][:, None, None] * region

    def get_class_probability(self):
        counts = torch.bincount(self.masks.flatten(), minlength=NUM_CLASSES).float()
        return counts / counts.sum()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {"image": self.images[idx], "mask": self.masks[idx]}


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class SegNet(nn.Module):
    def __init__(self, input_channels, output_channels):
        super().__init__()
        self.enc1 = nn.Sequential(conv_bn(input_channels, 16), conv_bn(16, 16))
        self.enc2 = nn.Sequential(conv_bn(16, 32), conv_bn(32, 32))
        self.dec2 = nn.Sequential(conv_bn(32, 32), conv_bn(32, 16))
        self.dec1 = nn.Sequential(conv_bn(16, 16), nn.Conv2d(16, output_channels, 3, padding=1))

    def forward(self, x):
        x = self.enc1(x)
        x, idx1 = F.max_pool2d(x, 2, 2, return_indices=True)
        x = self.enc2(x)
        x, idx2 = F.max_pool2d(x, 2, 2, return_indices=True)
        x = F.max_unpool2d(x, idx2, 2, 2)
        x = self.dec2(x)
        x = F.max_unpool2d(x, idx1, 2, 2)
        x_scores = self.dec1(x)
        x_softmax = F.softmax(x_scores, dim=1)
        return x_scores, x_softmax


def train():
    model.train()
    for epoch in range(NUM_EPOCHS):
        loss_f = 0.0
        for batch in train_dataloader:
            input_tensor, target_tensor = batch["image"], batch["mask"]
            predicted_tensor, softmaxed_tensor = model(input_tensor)

            optimizer.zero_grad()
            loss = criterion(softmaxed_tensor, target_tensor)
            loss.backward()
            optimizer.step()

            loss_f += loss.item()
        print(f"Epoch #{epoch + 1}\tLoss: {loss_f:.6f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    train_dataset = ShapesSegmentationDataset()
    train_dataloader = DataLoader(train_dataset, batch_size=BATCH_SIZE, shuffle=True,
                                  generator=torch.Generator().manual_seed(0))
    model = SegNet(input_channels=3, output_channels=NUM_CLASSES)
    class_weights = 1.0 / train_dataset.get_class_probability()
    criterion = nn.CrossEntropyLoss(weight=class_weights)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    train()
