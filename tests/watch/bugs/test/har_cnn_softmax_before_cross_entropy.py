"""A human-activity-recognition CNN on 9-channel inertial windows of 128 samples (UCI-HAR style):
a Network class with two Conv2d(kernel (1, 9)) + ReLU + MaxPool blocks over a (9, 1, 128) view of
each window and three fully connected blocks; a train(model, optimizer, train_loader, test_loader)
function owns the whole loop (nn.CrossEntropyLoss built inside, per-batch .view(-1, 9, 1, 128),
zero_grad / backward / step, running train accuracy, then a test pass with model.train(False) under
no_grad each epoch); SGD with momentum is built in __main__ and handed to train().

Bug: Network.forward ends with F.softmax(out, dim=1), so the model returns probabilities, and
train() feeds them to nn.CrossEntropyLoss, which applies its own log_softmax. The loss therefore
sees inputs squeezed into [0, 1], cannot fall below a floor well above zero, and the gradient is
shrunk by the extra softmax Jacobian, so training is slow and stalls. The argmax is unchanged, so
accuracy still looks plausible. The repository author confirmed in the thread that the softmax
must not be applied before nn.CrossEntropyLoss and said the code would be updated.

Thread: https://github.com/jindongwang/Deep-learning-activity-recognition/issues/10
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

DEVICE = torch.device("cpu")
config_info = {"batch_size": 64, "epoch": 6, "lr": 0.01, "momemtum": 0.9}
result = []


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(in_channels=9, out_channels=16, kernel_size=(1, 9)),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(1, 2), stride=2),
        )
        self.conv2 = nn.Sequential(
            nn.Conv2d(in_channels=16, out_channels=32, kernel_size=(1, 9)),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(1, 2), stride=2),
        )
        self.fc1 = nn.Sequential(nn.Linear(32 * 26, 128), nn.ReLU())
        self.fc2 = nn.Sequential(nn.Linear(128, 64), nn.ReLU())
        self.fc3 = nn.Sequential(nn.Linear(64, 6))

    def forward(self, x):
        out = self.conv1(x)
        out = self.conv2(out)
        out = out.reshape(-1, 32 * 26)
        out = self.fc1(out)
        out = self.fc2(out)
        out = self.fc3(out)
        out = F.softmax(out, dim=1)
        return out


def make_windows(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 6, (n,), generator=g)
    t = torch.arange(128).float() / 50.0
    freqs = torch.tensor([0.6, 1.1, 1.7, 2.3, 3.0, 3.8])
    phase = torch.rand(n, 9, 1, generator=g) * 6.28
    chan_gain = torch.linspace(0.5, 1.5, 9).view(1, 9, 1)
    f = freqs[labels].view(n, 1, 1)
    x = chan_gain * torch.sin(2 * 3.1416 * f * t.view(1, 1, -1) + phase)
    x = x + 0.15 * labels.view(n, 1, 1).float() / 5.0
    x = x + 0.6 * torch.randn(n, 9, 128, generator=g)
    return x, labels


def load(batch_size):
    xtr, ytr = make_windows(1200, 0)
    xte, yte = make_windows(400, 1)
    train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr),
                                               batch_size=batch_size, shuffle=True, drop_last=True)
    test_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xte, yte),
                                              batch_size=batch_size, shuffle=False)
    return train_loader, test_loader


def train(model, optimizer, train_loader, test_loader):
    n_batch = len(train_loader.dataset) // config_info["batch_size"]
    criterion = nn.CrossEntropyLoss()

    for e in range(config_info["epoch"]):
        model.train()
        correct, total_loss = 0, 0
        total = 0
        for index, (sample, target) in enumerate(train_loader):
            sample, target = sample.to(DEVICE).float(), target.to(DEVICE).long()
            sample = sample.view(-1, 9, 1, 128)
            output = model(sample)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            _, predicted = torch.max(output.data, 1)
            total += target.size(0)
            correct += (predicted == target).sum()
        acc_train = float(correct) * 100.0 / total
        print("Epoch: [{}/{}], loss: {:.4f}, train acc: {:.2f}%".format(
            e + 1, config_info["epoch"], total_loss / n_batch, acc_train))

        model.train(False)
        with torch.no_grad():
            correct, total = 0, 0
            for sample, target in test_loader:
                sample, target = sample.to(DEVICE).float(), target.to(DEVICE).long()
                sample = sample.view(-1, 9, 1, 128)
                output = model(sample)
                _, predicted = torch.max(output.data, 1)
                total += target.size(0)
                correct += (predicted == target).sum()
        acc_test = float(correct) * 100 / total
        print("Epoch: [{}/{}], test acc: {:.2f}%".format(e + 1, config_info["epoch"], acc_test))
        result.append([acc_train, acc_test])


if __name__ == "__main__":
    torch.manual_seed(10)
    train_loader, test_loader = load(batch_size=config_info["batch_size"])
    model = Network().to(DEVICE)
    optimizer = optim.SGD(params=model.parameters(), lr=config_info["lr"],
                          momentum=config_info["momemtum"])
    train(model, optimizer, train_loader, test_loader)
