"""
Shape: notebook cells flattened; SpeciesMLP(nn.Module) with three Linear layers, fit_epoch(net, batches, adam_opt) and score_epoch(net, batches) helpers that read a module-level ce_criterion, epoch loop calling both.
Bug: forward() ends with torch.softmax(self.fc3(x), dim=1) while ce_criterion is nn.CrossEntropyLoss, so the loss gets probabilities instead of logits.
Thread: https://github.com/MicrosoftDocs/ml-basics/issues/48
"""
import torch
import torch.nn as nn
import torch.utils.data as td

from penguin_data import features, penguin_classes, x_train, y_train, x_test, y_test

train_loader = td.DataLoader(td.TensorDataset(torch.Tensor(x_train).float(), torch.Tensor(y_train).long()),
                             batch_size=20, shuffle=False, num_workers=1)
test_loader = td.DataLoader(td.TensorDataset(torch.Tensor(x_test).float(), torch.Tensor(y_test).long()),
                            batch_size=20, shuffle=False, num_workers=1)

hidden = 10


class SpeciesMLP(nn.Module):
    def __init__(self):
        super(SpeciesMLP, self).__init__()
        self.fc1 = nn.Linear(len(features), hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, len(penguin_classes))

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = self.fc3(x)
        x = torch.softmax(x, dim=1)
        return x


net = SpeciesMLP()


def fit_epoch(net, batches, adam_opt):
    net.train()
    total = 0
    for batch, (feats, labels) in enumerate(batches):
        adam_opt.zero_grad()
        pred = net(feats)
        loss = ce_criterion(pred, labels)
        total += loss.item()
        loss.backward()
        adam_opt.step()
    return total / (batch + 1)


def score_epoch(net, batches):
    net.eval()
    total = 0
    n_right = 0
    with torch.no_grad():
        n = 0
        for feats, labels in batches:
            n += 1
            pred = net(feats)
            total += ce_criterion(pred, labels).item()
            _, pred_cls = torch.max(pred.data, 1)
            n_right += torch.sum(labels == pred_cls).item()
    return total / n


ce_criterion = nn.CrossEntropyLoss()
adam_opt = torch.optim.Adam(net.parameters(), lr=0.001)
adam_opt.zero_grad()

for epoch in range(1, 51):
    tr_loss = fit_epoch(net, train_loader, adam_opt)
    te_loss = score_epoch(net, test_loader)
    print(epoch, tr_loss, te_loss)
