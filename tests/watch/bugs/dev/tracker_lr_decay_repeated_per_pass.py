"""A GOTURN-style tracker regressor trained by train_model(model, datasets, criterion, optimizer):
the outer while loop walks a list of datasets, each call to get_training_batch adds one true and
ten jittered samples to a running batch, and only when a batch of 50 is complete ("done") does an
optimizer step happen and the iteration counter itr advance. The learning-rate decay check
`if itr > 0 and itr % lr_decay_step == 0` sits at the top of the outer while loop, which runs
several times per completed batch, so at every milestone the decay is applied two or three times
in a row and the learning rate falls by 100-1000x instead of 10x.

Thread: https://github.com/amoudgl/pygoturn/issues/16
"""
import torch
from torch import nn

BATCH_SIZE = 50
GENERATED_PER_IMAGE = 10
IMG = 16


class GoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten())
        for p in self.features.parameters():
            p.requires_grad = False  # pretrained feature extractor, kept fixed
        self.classifier = nn.Sequential(nn.Linear(2 * 8 * (IMG // 2) ** 2, 128), nn.ReLU(), nn.Linear(128, 4))

    def forward(self, prev_img, curr_img):
        return self.classifier(torch.cat([self.features(prev_img), self.features(curr_img)], dim=1))


class ToyTrackingDataset:
    """Each draw is one object: a bright square in both frames, moved a little in the current one."""

    def __init__(self, seed, max_shift):
        self.g = torch.Generator().manual_seed(seed)
        self.max_shift = max_shift

    def draw(self, n):
        prev = 0.1 * torch.randn(n, 3, IMG, IMG, generator=self.g)
        curr = 0.1 * torch.randn(n, 3, IMG, IMG, generator=self.g)
        boxes = torch.zeros(n, 4)
        for i in range(n):
            r, c = torch.randint(self.max_shift, IMG - 4 - self.max_shift, (2,), generator=self.g).tolist()
            dr, dc = torch.randint(-self.max_shift, self.max_shift + 1, (2,), generator=self.g).tolist()
            prev[i, :, r:r + 4, c:c + 4] += 1.0
            curr[i, :, r + dr:r + dr + 4, c + dc:c + dc + 4] += 1.0
            boxes[i] = torch.tensor([c + dc, r + dr, c + dc + 4, r + dr + 4], dtype=torch.float) * 10 / IMG
        return prev, curr, boxes


def make_transformed_samples(dataset):
    return dataset.draw(GENERATED_PER_IMAGE + 1)


def new_running_batch():
    return {"previmg": torch.zeros(BATCH_SIZE, 3, IMG, IMG), "currimg": torch.zeros(BATCH_SIZE, 3, IMG, IMG),
            "currbb": torch.zeros(BATCH_SIZE, 4)}


def get_training_batch(running_batch_idx, running_batch, dataset):
    n = GENERATED_PER_IMAGE + 1
    x1, x2, y = make_transformed_samples(dataset)
    if running_batch_idx + n <= BATCH_SIZE:
        sl = slice(running_batch_idx, running_batch_idx + n)
        running_batch["previmg"][sl], running_batch["currimg"][sl], running_batch["currbb"][sl] = x1, x2, y
        return running_batch, None, False, running_batch_idx + n
    count_in = BATCH_SIZE - running_batch_idx
    sl = slice(running_batch_idx, BATCH_SIZE)
    running_batch["previmg"][sl], running_batch["currimg"][sl], running_batch["currbb"][sl] = \
        x1[:count_in], x2[:count_in], y[:count_in]
    train_batch, rest = running_batch, n - count_in
    running_batch = new_running_batch()
    running_batch["previmg"][:rest], running_batch["currimg"][:rest], running_batch["currbb"][:rest] = \
        x1[count_in:], x2[count_in:], y[count_in:]
    return running_batch, train_batch, True, rest


def exp_lr_scheduler(optimizer, lr, gamma):
    lr = lr * gamma
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * gamma
    print(f"LR is set to {lr:.1e}")
    return optimizer, lr


def train_model(model, datasets, criterion, optimizer, args):
    lr = args["learning_rate"]
    running_batch_idx, running_batch = 0, new_running_batch()
    itr = 0
    while itr < args["num_batches"]:
        model.train()
        if itr > 0 and itr % args["lr_decay_step"] == 0:
            optimizer, lr = exp_lr_scheduler(optimizer, lr, args["gamma"])
        for dataset in datasets:
            running_batch, train_batch, done, running_batch_idx = get_training_batch(
                running_batch_idx, running_batch, dataset)
            if done:
                x1, x2, y = train_batch["previmg"], train_batch["currimg"], train_batch["currbb"]
                optimizer.zero_grad()
                output = model(x1, x2)
                loss = criterion(output, y)
                loss.backward()
                optimizer.step()
                itr += 1
                if itr % 10 == 0:
                    print(f"[training] step = {itr}/{args['num_batches']}, loss = {loss.item():.3f}")
                if itr >= args["num_batches"]:
                    break
    return model


def main():
    torch.manual_seed(0)
    args = {"num_batches": 150, "learning_rate": 2e-5, "gamma": 0.1, "momentum": 0.9,
            "weight_decay": 0.0005, "lr_decay_step": 30}
    net = GoNet()
    loss_fn = nn.L1Loss(reduction="sum")
    weights = [p for n, p in net.classifier.named_parameters() if "weight" in n]
    biases = [p for n, p in net.classifier.named_parameters() if "bias" in n]
    optimizer = torch.optim.SGD([{"params": weights, "lr": args["learning_rate"] * 10},
                                 {"params": biases, "lr": args["learning_rate"] * 20}],
                                lr=args["learning_rate"], momentum=args["momentum"],
                                weight_decay=args["weight_decay"])
    datasets = [ToyTrackingDataset(seed=1, max_shift=2), ToyTrackingDataset(seed=2, max_shift=3)]
    train_model(net, datasets, loss_fn, optimizer, args)


if __name__ == "__main__":
    main()
