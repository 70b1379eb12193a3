"""An OpenMMLab-style SimCLR algorithm: a SimCLR(BaseModel) class built from a backbone, a
non-linear neck and a ContrastiveHead, with a static _create_buffer(N) that builds the diagonal
mask, the positive-pair index and the negative mask, and a forward_train(img) that receives the
two augmented views as a list, runs them through backbone and neck, L2-normalises, gathers across
ranks and hands (positive, negative) similarities to the head; a small runner calls
train_step(), parses the loss dict and runs zero_grad/backward/step. forward_train joins the two
view batches with torch.cat, so row i and row N+i are the two views of image i, but
_create_buffer assumes interleaved pairs and takes rows 2k and 2k+1 as positives. Each "positive"
is therefore a view of a different image and the true partner view is scored as a negative. With
no consistent signal to follow, the network collapses its projections: the loss parks at
log(2N-1), the run finishes without any error, and the kNN accuracy of the backbone features
ends below where the random initialisation started instead of far above it.

Thread: https://github.com/open-mmlab/mmselfsup/issues/159
"""
import torch
from torch import nn
import torch.nn.functional as F

N_CLASSES, DIM = 32, 32


class GatherLayer(torch.autograd.Function):
    """Stand-in for the all_gather layer: a single process gathers only itself."""

    @staticmethod
    def forward(ctx, x):
        return (x,)

    @staticmethod
    def backward(ctx, *grads):
        return grads[0]


class ResNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())

    def forward(self, x):
        return [self.layers(x)]


class NonLinearNeck(nn.Module):
    def __init__(self, in_channels=64, hid_channels=64, out_channels=32):
        super().__init__()
        self.fc0 = nn.Linear(in_channels, hid_channels)
        self.fc1 = nn.Linear(hid_channels, out_channels)

    def forward(self, x):
        return [self.fc1(F.relu(self.fc0(x[0])))]


class ContrastiveHead(nn.Module):
    def __init__(self, temperature=0.1):
        super().__init__()
        self.criterion = nn.CrossEntropyLoss()
        self.temperature = temperature

    def forward(self, pos, neg):
        logits = torch.cat((pos, neg), dim=1) / self.temperature
        labels = torch.zeros((logits.size(0),), dtype=torch.long)
        return dict(loss=self.criterion(logits, labels))


class BaseModel(nn.Module):
    def forward(self, img, mode="train", **kwargs):
        return self.forward_train(img, **kwargs)

    def train_step(self, data, optimizer):
        losses = self(**data)
        loss = sum(v for k, v in losses.items() if "loss" in k)
        return dict(loss=loss, log_vars={k: v.item() for k, v in losses.items()}, num_samples=len(data["img"][0]))


class SimCLR(BaseModel):
    def __init__(self, backbone, neck, head):
        super().__init__()
        self.backbone = backbone
        self.neck = neck
        self.head = head

    @staticmethod
    def _create_buffer(N):
        mask = 1 - torch.eye(N * 2, dtype=torch.uint8)
        pos_ind = (torch.arange(N * 2),
                   2 * torch.arange(N, dtype=torch.long).unsqueeze(1).repeat(1, 2).view(-1, 1).squeeze())
        neg_mask = torch.ones((N * 2, N * 2 - 1), dtype=torch.uint8)
        neg_mask[pos_ind] = 0
        return mask, pos_ind, neg_mask

    def extract_feat(self, img):
        return self.backbone(img)

    def forward_train(self, img, **kwargs):
        assert isinstance(img, list)
        img = torch.cat(img)
        x = self.extract_feat(img)  # 2n
        z = self.neck(x)[0]  # (2n)xd
        z = z / (torch.norm(z, p=2, dim=1, keepdim=True) + 1e-10)
        z = torch.cat(GatherLayer.apply(z), dim=0)  # (2N)xd
        assert z.size(0) % 2 == 0
        N = z.size(0) // 2
        s = torch.matmul(z, z.permute(1, 0))  # (2N)x(2N)
        mask, pos_ind, neg_mask = self._create_buffer(N)
        s = torch.masked_select(s, mask == 1).reshape(s.size(0), -1)  # remove diagonal
        positive = s[pos_ind].unsqueeze(1)  # (2N)x1
        negative = torch.masked_select(s, neg_mask == 1).reshape(s.size(0), -1)
        return self.head(positive, negative)


class MultiViewDataset(torch.utils.data.Dataset):
    """Unlabelled images (here: vectors) from class prototypes; each item yields two views."""

    def __init__(self, n, seed):
        gp = torch.Generator().manual_seed(11)
        self.protos = torch.randn(N_CLASSES, DIM // 2, generator=gp)
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASSES, (n,), generator=g)
        content = self.protos[self.labels] + 0.5 * torch.randn(n, DIM // 2, generator=g)
        style = 3.0 * torch.randn(n, DIM // 2, generator=g)      # nuisance: lighting, crop, colour
        self.data = torch.cat([content, style], dim=1)
        self.aug = torch.Generator().manual_seed(seed + 100)

    def __len__(self):
        return len(self.labels)

    def _view(self, x):
        # the augmentation re-draws the nuisance half and jitters the content half
        content = x[: DIM // 2] * (0.8 + 0.4 * torch.rand(1, generator=self.aug))
        content = content + 0.3 * torch.randn(DIM // 2, generator=self.aug)
        style = 3.0 * torch.randn(DIM // 2, generator=self.aug)
        return torch.cat([content, style])

    def __getitem__(self, i):
        x = self.data[i]
        return dict(img=[self._view(x), self._view(x)])


def collate(batch):
    return dict(img=[torch.stack([b["img"][0] for b in batch]), torch.stack([b["img"][1] for b in batch])])


@torch.no_grad()
def knn_accuracy(model, train_set, test_set, k=10):
    model.eval()
    f_tr = F.normalize(model.extract_feat(train_set.data)[0], dim=1)
    f_te = F.normalize(model.extract_feat(test_set.data)[0], dim=1)
    idx = (f_te @ f_tr.T).topk(k, dim=1).indices
    votes = F.one_hot(train_set.labels[idx], N_CLASSES).sum(1)
    model.train()
    return (votes.argmax(1) == test_set.labels).float().mean().item()


def main():
    torch.manual_seed(0)
    train_set, test_set = MultiViewDataset(2048, seed=1), MultiViewDataset(1024, seed=2)
    loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True, drop_last=True,
                                         collate_fn=collate, generator=torch.Generator().manual_seed(0))
    model = SimCLR(ResNetLike(), NonLinearNeck(), ContrastiveHead(temperature=0.1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-6)
    print(f"epoch 0  kNN acc {knn_accuracy(model, train_set, test_set):.3f}")
    it = 0
    for epoch in range(1, 13):
        running = 0.0
        for data in loader:
            outputs = model.train_step(data, optimizer)
            optimizer.zero_grad()
            outputs["loss"].backward()
            optimizer.step()
            running += outputs["log_vars"]["loss"]
            it += 1
        if epoch % 3 == 0:
            print(f"epoch {epoch:2d}  iter {it:4d}  loss {running / len(loader):.4f}  "
                  f"kNN acc {knn_accuracy(model, train_set, test_set):.3f}")


if __name__ == "__main__":
    main()
