"""A supervised deep-hashing setup in the style of "Deep Learning of Binary Hash Codes for Fast
Image Retrieval": an AlexNetPlusLatent(bits) network (convolutional features, the AlexNet
classifier trunk with two Dropout(0.5) layers, a Linear(4096 -> bits) latent layer with a sigmoid,
and a Linear(bits -> 10) head) whose forward returns (features, result). A module-level train(epoch)
puts the net in train mode and runs zero_grad / CrossEntropyLoss / backward / step with SGD over two
parameter groups (new layers at lr, pretrained trunk at 0.1 * lr), test() switches to eval and keeps
the best state, and ReduceLROnPlateau is stepped on the training loss. The separate evaluation step,
binary_output(dataloader), builds a fresh AlexNetPlusLatent, loads the saved state and runs it under
no_grad, rounding the sigmoid features to 0/1 codes, but never calls net.eval(): both dropout layers
stay on, so every database and query code is computed from a randomly thinned network, the codes
vary from run to run and the Hamming-ranking mAP that is reported is not that of the trained model.

Thread: https://github.com/spoonnotfound/pytorch_deephash/pull/21
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
BITS, CLASSES, SIZE = 24, 10, 16


def cifar_like(n, seed):
    g = torch.Generator().manual_seed(seed)
    pg = torch.Generator().manual_seed(11)
    templates = torch.rand(CLASSES, 3, SIZE, SIZE, generator=pg)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    images = 0.65 * templates[labels] + 0.35 * torch.rand(n, 3, SIZE, SIZE, generator=g)
    mean, std = images.mean((0, 2, 3), keepdim=True), images.std((0, 2, 3), keepdim=True)
    return TensorDataset((images - mean) / std, labels)


class AlexNetPlusLatent(nn.Module):
    def __init__(self, bits):
        super().__init__()
        self.bits = bits
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 48, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.remain = nn.Sequential(
            nn.Dropout(0.5), nn.Linear(48 * 4 * 4, 256), nn.ReLU(inplace=True),
            nn.Dropout(0.5), nn.Linear(256, 256), nn.ReLU(inplace=True))
        self.Linear1 = nn.Linear(256, bits)
        self.sigmoid = nn.Sigmoid()
        self.Linear2 = nn.Linear(bits, CLASSES)

    def forward(self, x):
        x = self.features(x).flatten(1)
        x = self.remain(x)
        features = self.sigmoid(self.Linear1(x))
        return features, self.Linear2(features)


trainloader = DataLoader(cifar_like(3000, seed=1), batch_size=100, shuffle=True,
                         generator=torch.Generator().manual_seed(2))
testloader = DataLoader(cifar_like(1000, seed=3), batch_size=100, shuffle=False)

net = AlexNetPlusLatent(BITS)
criterion = nn.CrossEntropyLoss()
new_params = list(net.Linear1.parameters()) + list(net.Linear2.parameters())
base_params = list(net.features.parameters()) + list(net.remain.parameters())
lr = 0.2
optimizer = torch.optim.SGD([{"params": new_params}, {"params": base_params, "lr": 0.1 * lr}],
                            lr=lr, momentum=0.9, weight_decay=0.0005)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
best_acc, best_state = 0.0, None


def train(epoch):
    net.train()
    train_loss, correct, total = 0.0, 0, 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        optimizer.zero_grad()
        _, outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        correct += (outputs.argmax(1) == targets).sum().item()
        total += targets.size(0)
    print("epoch %d | loss %.3f | train acc %.2f%%" % (epoch, train_loss / (batch_idx + 1), 100.0 * correct / total))
    return train_loss / (batch_idx + 1)


def test():
    global best_acc, best_state
    net.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for inputs, targets in testloader:
            _, outputs = net(inputs)
            correct += (outputs.argmax(1) == targets).sum().item()
            total += targets.size(0)
    acc = 100.0 * correct / total
    print("test acc %.2f%%" % acc)
    if acc > best_acc:
        best_acc, best_state = acc, {k: v.clone() for k, v in net.state_dict().items()}


def binary_output(dataloader):
    net = AlexNetPlusLatent(BITS)
    net.load_state_dict(best_state)
    full_batch_output, full_batch_label = [], []
    with torch.no_grad():
        for inputs, targets in dataloader:
            outputs, _ = net(inputs)
            full_batch_output.append(outputs)
            full_batch_label.append(targets)
    return torch.round(torch.cat(full_batch_output)), torch.cat(full_batch_label)


def evaluate(trn_binary, trn_label, tst_binary, tst_label):
    aps = []
    for i in range(len(tst_binary)):
        hamming = np.count_nonzero(tst_binary[i] != trn_binary, axis=1)
        order = np.argsort(hamming, kind="stable")
        relevant = (trn_label[order] == tst_label[i]).astype(float)
        precision = np.cumsum(relevant) / np.arange(1, len(relevant) + 1)
        aps.append((precision * relevant).sum() / max(relevant.sum(), 1.0))
    print("mAP: %.4f" % np.mean(aps))


for epoch in range(5):
    val_loss = train(epoch)
    test()
    scheduler.step(val_loss)

database_loader = DataLoader(trainloader.dataset, batch_size=100, shuffle=False)
train_binary, train_label = binary_output(database_loader)
test_binary, test_label = binary_output(testloader)
evaluate(train_binary.numpy().astype(np.int32), train_label.numpy(),
         test_binary.numpy().astype(np.int32)[:300], test_label.numpy()[:300])
