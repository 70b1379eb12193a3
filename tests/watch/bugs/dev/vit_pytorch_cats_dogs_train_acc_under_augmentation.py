"""Notebook-style cats-vs-dogs run with a small ViT (dropout and emb_dropout): a item-list Dataset
applies train_transforms (random resized crop, horizontal flip) or val_transforms (none), Adam with
StepLR, and one epoch loop that adds each training batch's loss and accuracy into run_loss /
run_acc, then a torch.no_grad() pass over the validation loader and one print per epoch.

The printed training accuracy is a running mean over augmented, dropout-on batches while the
weights move; validation sees clean images. So validation accuracy is above training accuracy (and
validation loss below training loss) in every epoch, though nothing leaks: scored through the
validation pipeline, the model does at least as well on its own training images.

Thread: https://github.com/lucidrains/vit-pytorch/issues/311
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

# Training settings
batch_size = 64
epochs = 5
lr = 1e-3
gamma = 0.7
seed = 42
SIZE = 32


def make_items(n, g):
    """Synthetic 'photos': one small patch per image, warm-coloured for dogs (1), cool for cats (0)."""
    labels = torch.randint(0, 2, (n,), generator=g)
    imgs = 0.5 * torch.randn(n, 3, SIZE, SIZE, generator=g)
    for i in range(n):
        cy, cx = (int(v) for v in torch.randint(4, SIZE - 4, (2,), generator=g))
        warm = 1.0 if labels[i] == 1 else 0.0
        imgs[i, 0, cy - 4:cy + 4, cx - 4:cx + 4] += 0.2 + 0.8 * warm
        imgs[i, 1, cy - 4:cy + 4, cx - 4:cx + 4] += 0.5
        imgs[i, 2, cy - 4:cy + 4, cx - 4:cx + 4] += 1.0 - 0.8 * warm
    return list(zip(imgs, labels.tolist()))


def random_resized_crop(img, g, scale=(0.08, 1.0)):
    area = SIZE * SIZE * float(torch.empty(1).uniform_(*scale, generator=g))
    side = max(4, min(SIZE, int(area ** 0.5)))
    y = int(torch.randint(0, SIZE - side + 1, (1,), generator=g))
    x = int(torch.randint(0, SIZE - side + 1, (1,), generator=g))
    crop = img[:, y:y + side, x:x + side].unsqueeze(0)
    return F.interpolate(crop, size=(SIZE, SIZE), mode="bilinear", align_corners=False)[0]


class TrainTransforms:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def __call__(self, img):
        img = random_resized_crop(img, self.g)
        if torch.rand(1, generator=self.g) < 0.5:
            img = img.flip(-1)
        return img


def val_transforms(img):
    return img


class PetImageList(Dataset):
    def __init__(self, items, transform=None):
        self.items = items
        self.transform = transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        img, label = self.items[idx]
        return self.transform(img), label


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_dim, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),
                                nn.Linear(mlp_dim, dim), nn.Dropout(dropout))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim,
                 dropout=0.0, emb_dropout=0.0):
        super().__init__()
        n = (image_size // patch_size) ** 2
        self.to_patch = nn.Conv2d(3, dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embedding = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.dropout = nn.Dropout(emb_dropout)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp_dim, dropout) for _ in range(depth)])
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))

    def forward(self, img):
        x = self.to_patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        x = self.blocks(self.dropout(x))
        return self.mlp_head(x[:, 0])


def main():
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    train_list = make_items(768, g)
    valid_list = make_items(256, g)

    ds_tr = PetImageList(train_list, transform=TrainTransforms(seed))
    ds_va = PetImageList(valid_list, transform=val_transforms)
    loader_tr = DataLoader(ds_tr, batch_size=batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(seed))
    loader_va = DataLoader(ds_va, batch_size=batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(seed))

    model = ViT(image_size=SIZE, patch_size=8, num_classes=2, dim=48, depth=2, heads=4,
                mlp_dim=96, dropout=0.1, emb_dropout=0.1)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=gamma)

    for epoch in range(epochs):
        run_loss = 0
        run_acc = 0
        for data, label in loader_tr:
            output = model(data)
            loss = criterion(output, label)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            acc = (output.argmax(dim=1) == label).float().mean()
            run_acc += acc / len(loader_tr)
            run_loss += loss.item() / len(loader_tr)
        scheduler.step()

        with torch.no_grad():
            val_acc_sum = 0
            val_loss_sum = 0
            for data, label in loader_va:
                logits_va = model(data)
                val_loss = criterion(logits_va, label)

                acc = (logits_va.argmax(dim=1) == label).float().mean()
                val_acc_sum += acc / len(loader_va)
                val_loss_sum += val_loss.item() / len(loader_va)

        print(f"[epoch {epoch + 1}] train loss {run_loss:.4f} acc {run_acc:.4f} | "
              f"val loss {val_loss_sum:.4f} acc {val_acc_sum:.4f}")


if __name__ == "__main__":
    main()
