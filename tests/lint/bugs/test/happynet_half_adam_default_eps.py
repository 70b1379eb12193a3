"""
Shape: a flat emotion-classification script in the HappyNet style: an nn.Module with five Conv2d blocks, two fully connected layers and a softmax output, converted to half precision with .cuda().half() to fit a very large dataset; inputs are cast to half per batch, torch.optim.Adam is built over the half model's parameters with its defaults, and a plain epoch loop runs forward, NLL loss on the log of the softmax output, backward and step.
Bug: the whole model, and so Adam's state, is float16; Adam's default eps=1e-8 rounds to zero in half precision, the denominator can become zero and the loss turns NaN after a few iterations.
Thread: https://github.com/pytorch/pytorch/issues/8860
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

N_EMOTIONS = 7


class FaceNet(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [1, 32, 64, 128, 128, 256]
        self.convs = nn.ModuleList(
            [nn.Conv2d(chans[i], chans[i + 1], kernel_size=3, padding=1) for i in range(5)]
        )
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(256 * 1 * 1, 512)
        self.fc2 = nn.Linear(512, N_EMOTIONS)
        self.out = nn.Softmax(dim=1)

    def forward(self, x):
        for conv in self.convs:
            x = self.pool(F.relu(conv(x)))
        x = x.view(x.size(0), -1)
        x = F.relu(self.fc1(x))
        return self.out(self.fc2(x))


def make_loader(root, batch_size):
    tf = transforms.Compose([
        transforms.Grayscale(),
        transforms.Resize((48, 48)),
        transforms.ToTensor(),
    ])
    ds = datasets.ImageFolder(root, transform=tf)
    return DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=4)


net = FaceNet().cuda().half()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
loader = make_loader("data/faces/train", batch_size=128)

for epoch in range(30):
    running = 0.0
    for step, (images, labels) in enumerate(loader):
        images = images.cuda().half()
        labels = labels.cuda()
        optimizer.zero_grad()
        probs = net(images)
        loss = F.nll_loss(torch.log(probs.float() + 1e-7), labels)
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 100 == 99:
            print("epoch %d step %d loss %.4f" % (epoch, step + 1, running / 100))
            running = 0.0
    torch.save(net.state_dict(), "facenet_half_e%d.pt" % epoch)
