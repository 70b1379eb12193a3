"""A beginners' book chapter on image classification: a SimpleNet of three fully connected layers
with ReLU between them over flattened small colour images (two classes), Adam (lr 1e-3) and
CrossEntropyLoss, trained by a train(model, optimizer, loss_fn, train_loader, val_loader, epochs,
device) function that runs a training pass and then a validation pass every epoch. The validation
pass turns the outputs into probabilities with F.softmax(output, dim=0), across the batch instead of
across the two classes, and then takes the argmax over the class dimension, so the accuracy it prints
is not the accuracy of the model's predictions.

Thread: https://github.com/falloutdurham/beginners-pytorch-deep-learning/pull/36
"""
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

SIDE = 16
FLAT = 3 * SIDE * SIDE


def make_pictures(n, seed):
    g = torch.Generator().manual_seed(seed)
    proto = torch.randn(2, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(11))
    # about 70% of the pictures are of the first class, as in a small scraped set
    labels = (torch.rand(n, generator=g) < 0.3).long()
    images = 0.06 * proto[labels] + torch.randn(n, 3, SIDE, SIDE, generator=g)
    return TensorDataset(images, labels)


class SimpleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FLAT, 84)
        self.fc2 = nn.Linear(84, 50)
        self.fc3 = nn.Linear(50, 2)

    def forward(self, x):
        x = x.view(-1, FLAT)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def train(model, optimizer, loss_fn, train_loader, val_loader, epochs=20, device="cpu"):
    for epoch in range(1, epochs + 1):
        training_loss = 0.0
        valid_loss = 0.0
        model.train()
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            inputs, targets = inputs.to(device), targets.to(device)
            output = model(inputs)
            loss = loss_fn(output, targets)
            loss.backward()
            optimizer.step()
            training_loss += loss.item() * inputs.size(0)
        training_loss /= len(train_loader.dataset)

        model.eval()
        num_correct = 0
        num_examples = 0
        with torch.no_grad():
            for inputs, targets in val_loader:
                inputs, targets = inputs.to(device), targets.to(device)
                output = model(inputs)
                loss = loss_fn(output, targets)
                valid_loss += loss.item() * inputs.size(0)
                probs = F.softmax(output, dim=0)
                correct = torch.eq(torch.max(probs, dim=1)[1], targets)
                num_correct += torch.sum(correct).item()
                num_examples += correct.shape[0]
        valid_loss /= len(val_loader.dataset)
        print(f"Epoch: {epoch}, Training Loss: {training_loss:.2f}, Validation Loss: {valid_loss:.2f}, "
              f"accuracy = {num_correct / num_examples:.2f}")


def main():
    torch.manual_seed(0)
    batch_size = 64
    train_loader = DataLoader(make_pictures(2048, seed=1), batch_size=batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(make_pictures(512, seed=2), batch_size=batch_size)
    simplenet = SimpleNet()
    optimizer = optim.Adam(simplenet.parameters(), lr=0.001)
    train(simplenet, optimizer, nn.CrossEntropyLoss(), train_loader, val_loader, epochs=4, device="cpu")


if __name__ == "__main__":
    main()
