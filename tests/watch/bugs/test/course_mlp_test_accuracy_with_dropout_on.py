"""A course-notebook style digit classifier: a fully connected network with two hidden layers, each
followed by nn.Dropout(0.5), trained with SGD and CrossEntropyLoss in a plain loop that prints the
average training loss per epoch. After training, a separate "test the trained network" cell walks
the test loader, accumulates the test loss and per-class correct counts, and prints the overall
test accuracy and the accuracy of each class. Data are synthetic 8x8 "digit" templates plus noise.

Bug: the test cell never calls model.eval() (the model is still in the train mode it was built
in), so both dropout layers keep zeroing half of the hidden units while the test set is scored.
The reported test loss and per-class accuracies are those of randomly thinned sub-networks, lower
and noisier than the trained network actually achieves, and they change from run to run of the
cell even though the weights are fixed.

Thread: https://github.com/udacity/deep-learning-v2-pytorch/pull/397
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        hidden_1, hidden_2 = 128, 64
        self.fc1 = nn.Linear(8 * 8, hidden_1)
        self.fc2 = nn.Linear(hidden_1, hidden_2)
        self.fc3 = nn.Linear(hidden_2, 10)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x = x.view(-1, 8 * 8)
        x = F.relu(self.fc1(x))
        x = self.dropout(x)
        x = F.relu(self.fc2(x))
        x = self.dropout(x)
        return self.fc3(x)


def make_digits(n, templates, g):
    y = torch.randint(0, 10, (n,), generator=g)
    x = templates[y] + 0.9 * torch.randn(n, 1, 8, 8, generator=g)
    return x, y


torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
templates = (torch.rand(10, 1, 8, 8, generator=g) > 0.6).float()
train_x, train_y = make_digits(3000, templates, g)
test_x, test_y = make_digits(1000, templates, g)
batch_size = 20
train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
test_loader = DataLoader(TensorDataset(test_x, test_y), batch_size=batch_size)

model = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

n_epochs = 3
model.train()
for epoch in range(n_epochs):
    train_loss = 0.0
    for data, target in train_loader:
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        train_loss += loss.item() * data.size(0)
    train_loss = train_loss / len(train_loader.dataset)
    print(f"Epoch: {epoch + 1} \tTraining Loss: {train_loss:.6f}")

# test the trained network
test_loss = 0.0
class_correct = [0.0] * 10
class_total = [0.0] * 10
for data, target in test_loader:
    output = model(data)
    loss = criterion(output, target)
    test_loss += loss.item() * data.size(0)
    _, pred = torch.max(output, 1)
    correct = pred.eq(target.view_as(pred))
    for i in range(len(target)):
        label = target[i].item()
        class_correct[label] += correct[i].item()
        class_total[label] += 1

test_loss = test_loss / len(test_loader.dataset)
print(f"Test Loss: {test_loss:.6f}")
for i in range(10):
    print(f"Test Accuracy of {i}: {100 * class_correct[i] / class_total[i]:.1f}% "
          f"({int(class_correct[i])}/{int(class_total[i])})")
print(f"Test Accuracy (Overall): {100.0 * sum(class_correct) / sum(class_total):.1f}%")
