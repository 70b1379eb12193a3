"""A course notebook's MLP classifier with validation: a Net with three fully connected layers and
dropout after each hidden layer, a train/valid split through two SubsetRandomSamplers, SGD with
CrossEntropyLoss, per epoch a training loop (zero_grad, forward, loss, backward, step) and a
validation loop, keeping the weights whenever the validation loss decreases, then a per-class test
accuracy. The notebook never calls model.eval() (nor model.train()), so validation and test run
with dropout active: the validation loss that selects the checkpoint and the final test accuracy
are measured on a randomly thinned network.

Thread: https://github.com/udacity/deep-learning-v2-pytorch/issues/3
"""
import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.sampler import SubsetRandomSampler


def digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    strokes = (torch.rand(10, 1, 12, 12, generator=torch.Generator().manual_seed(5)) > 0.6).float()
    y = torch.randint(0, 10, (n,), generator=g)
    x = (strokes[y] + 1.0 * torch.randn(n, 1, 12, 12, generator=g)).clamp(0, 1)
    return TensorDataset((x - 0.5) / 0.5, y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        hidden_1, hidden_2 = 128, 128
        self.fc1 = nn.Linear(12 * 12, hidden_1)
        self.fc2 = nn.Linear(hidden_1, hidden_2)
        self.fc3 = nn.Linear(hidden_2, 10)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x):
        x = x.view(-1, 12 * 12)
        x = self.dropout(F.relu(self.fc1(x)))
        x = self.dropout(F.relu(self.fc2(x)))
        return self.fc3(x)


def main():
    torch.manual_seed(0)
    batch_size, valid_size = 20, 0.2
    train_data, test_data = digits(2000, seed=1), digits(500, seed=2)
    indices = list(range(len(train_data)))
    np.random.seed(0)
    np.random.shuffle(indices)
    split = int(np.floor(valid_size * len(train_data)))
    train_sampler = SubsetRandomSampler(indices[split:])
    valid_sampler = SubsetRandomSampler(indices[:split])
    train_loader = DataLoader(train_data, batch_size=batch_size, sampler=train_sampler)
    valid_loader = DataLoader(train_data, batch_size=batch_size, sampler=valid_sampler)
    test_loader = DataLoader(test_data, batch_size=batch_size)

    model = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    n_epochs = 3
    valid_loss_min, best_state = np.inf, None
    for epoch in range(n_epochs):
        train_loss, valid_loss = 0.0, 0.0
        for data, target in train_loader:
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
            train_loss += loss.item() * data.size(0)
        for data, target in valid_loader:
            output = model(data)
            loss = criterion(output, target)
            valid_loss += loss.item() * data.size(0)
        train_loss = train_loss / len(train_loader.sampler)
        valid_loss = valid_loss / len(valid_loader.sampler)
        print(f"Epoch: {epoch + 1} \tTraining Loss: {train_loss:.6f} \tValidation Loss: {valid_loss:.6f}")
        if valid_loss <= valid_loss_min:
            print(f"Validation loss decreased ({valid_loss_min:.6f} --> {valid_loss:.6f}).  Saving model ...")
            best_state = copy.deepcopy(model.state_dict())
            valid_loss_min = valid_loss

    model.load_state_dict(best_state)
    class_correct, class_total = [0.0] * 10, [0.0] * 10
    test_loss = 0.0
    for data, target in test_loader:
        output = model(data)
        test_loss += criterion(output, target).item() * data.size(0)
        correct = output.argmax(1).eq(target)
        for i in range(len(target)):
            class_correct[target[i]] += correct[i].item()
            class_total[target[i]] += 1
    print(f"Test Loss: {test_loss / len(test_loader.dataset):.6f}")
    print(f"Test Accuracy (Overall): {100.0 * sum(class_correct) / sum(class_total):.2f}%")


if __name__ == "__main__":
    main()
