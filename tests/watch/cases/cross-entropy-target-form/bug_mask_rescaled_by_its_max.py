"""A Trainer for a small segmentation network loads (image, mask) pairs through one preprocess()
that rescales any array whose maximum is above 1 by that maximum, meant for 0-255 images; the masks
hold class ids 0-3, so they come out as 0, 1/3, 2/3 and 1. The Trainer's step casts the mask to long
for nn.CrossEntropyLoss: classes 0-2 all become 0 and class 3 becomes 1, so the network learns two
classes instead of four and training looks healthy."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class TileDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            ids = torch.randint(0, 4, (4, 4), generator=g).repeat_interleave(4, 0).repeat_interleave(4, 1)
            image = 50.0 * ids + 20 * torch.rand(16, 16, generator=g) + 5
            self.items.append((image[None], ids[None].float()))

    @staticmethod
    def preprocess(array):
        if array.max() > 1:
            array = array / array.max()
        return array

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        image, mask = self.items[i]
        return {"image": self.preprocess(image), "mask": self.preprocess(mask)}


class Trainer:
    def __init__(self, model, loader, lr=3e-3):
        self.model, self.loader = model, loader
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def step(self, batch):
        logits = self.model(batch["image"])
        loss = self.criterion(logits, batch["mask"][:, 0].to(torch.long))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item(), logits

    def fit(self, epochs):
        for epoch in range(epochs):
            for batch in self.loader:
                loss, logits = self.step(batch)
            print(f"epoch {epoch} loss {loss:.4f} classes predicted {logits.argmax(1).unique().tolist()}")


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 4, 1))
    loader = DataLoader(TileDataset(384, 0), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    Trainer(model, loader).fit(epochs=3)


if __name__ == "__main__":
    main()
