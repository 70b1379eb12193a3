"""A standalone FedAvg simulation: a trainer that samples clients each round, reuses a few Client
objects by swapping in each sampled client's local data, calls client.train(w_global) (which loads
the global weights, builds SGD and runs local epochs) and averages the returned weights by sample
count. The digit CNN (conv, conv, pool, dropout, dense, dropout, dense) ends in nn.Softmax while the
client's criterion is nn.CrossEntropyLoss, so every local step trains on a doubly normalised output.

Thread: https://github.com/FedML-AI/FedML/pull/66
"""
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CNNDropOut(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv2d_1, self.conv2d_2 = nn.Conv2d(1, 16, 3), nn.Conv2d(16, 32, 3)
        self.max_pooling, self.flatten = nn.MaxPool2d(2, stride=2), nn.Flatten()
        self.dropout_1, self.dropout_2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.linear_1, self.linear_2 = nn.Linear(32 * 4 * 4, 64), nn.Linear(64, num_classes)
        self.relu, self.softmax = nn.ReLU(), nn.Softmax(dim=1)

    def forward(self, x):
        x = torch.unsqueeze(x, 1)
        x = self.max_pooling(self.conv2d_2(self.conv2d_1(x)))
        x = self.flatten(self.dropout_1(x))
        x = self.dropout_2(self.relu(self.linear_1(x)))
        return self.softmax(self.linear_2(x))


class Client:
    def __init__(self, client_idx, local_training_data, local_sample_number, args, model):
        self.client_idx, self.local_training_data = client_idx, local_training_data
        self.local_sample_number, self.args, self.model = local_sample_number, args, model
        self.criterion = nn.CrossEntropyLoss()

    def update_local_dataset(self, client_idx, local_training_data, local_sample_number):
        self.client_idx, self.local_training_data = client_idx, local_training_data
        self.local_sample_number = local_sample_number

    def train(self, w_global):
        self.model.load_state_dict(w_global)
        self.model.train()
        optimizer = torch.optim.SGD(self.model.parameters(), lr=self.args["lr"])
        epoch_loss = []
        for _ in range(self.args["epochs"]):
            batch_loss = []
            for x, labels in self.local_training_data:
                self.model.zero_grad()
                log_probs = self.model(x)
                loss = self.criterion(log_probs, labels)
                loss.backward()
                optimizer.step()
                batch_loss.append(loss.item())
            epoch_loss.append(sum(batch_loss) / len(batch_loss))
        return self.model.state_dict(), sum(epoch_loss) / len(epoch_loss)


def aggregate(w_locals):
    training_num = sum(n for n, _ in w_locals)
    averaged = copy.deepcopy(w_locals[0][1])
    for k in averaged:
        averaged[k] = sum(params[k] * (n / training_num) for n, params in w_locals)
    return averaged


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    protos = torch.rand(10, 12, 12, generator=g)
    local_data = {}
    for c in range(20):
        y = torch.randint(0, 10, (60,), generator=g)
        x = 0.7 * protos[y] + 0.3 * torch.rand(60, 12, 12, generator=g)
        local_data[c] = DataLoader(TensorDataset(x, y), batch_size=20, shuffle=True,
                                   generator=torch.Generator().manual_seed(c))
    args = {"lr": 0.03, "epochs": 1, "client_num_per_round": 4}
    model = CNNDropOut()
    clients = [Client(i, local_data[i], 60, args, copy.deepcopy(model)) for i in range(args["client_num_per_round"])]
    for round_idx in range(8):
        w_global = model.state_dict()
        w_locals, losses = [], []
        for client, idx in zip(clients, torch.randperm(20, generator=g)[:4].tolist()):
            client.update_local_dataset(idx, local_data[idx], 60)
            w, loss = client.train(copy.deepcopy(w_global))
            w_locals.append((60, copy.deepcopy(w)))
            losses.append(loss)
        model.load_state_dict(aggregate(w_locals))
        print(f"round {round_idx} train loss {sum(losses) / len(losses):.4f}")


if __name__ == "__main__":
    main()
