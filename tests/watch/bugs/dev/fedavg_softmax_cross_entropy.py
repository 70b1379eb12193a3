"""A federated-averaging simulation: a LocalUpdate class whose train(net) method runs local SGD on a
client's shard and returns the weights, averaged by FedAvg each round. The MLP ends in softmax and
the local loss is CrossEntropyLoss, so every client trains on a doubly normalised output.

Thread: https://github.com/shaoxiongji/federated-learning/issues/9
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset


class MLP(nn.Module):
    def __init__(self, dim_in, dim_hidden, dim_out):
        super().__init__()
        self.layer_input = nn.Linear(dim_in, dim_hidden)
        self.dropout = nn.Dropout()
        self.layer_hidden = nn.Linear(dim_hidden, dim_out)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.dropout(F.relu(self.layer_input(x)))
        return self.softmax(self.layer_hidden(x))


class LocalUpdate:
    def __init__(self, args, dataset, idxs):
        self.args = args
        self.loss_func = nn.CrossEntropyLoss()
        self.ldr_train = DataLoader(Subset(dataset, idxs), batch_size=args["local_bs"], shuffle=True,
                                    generator=torch.Generator().manual_seed(len(idxs)))

    def train(self, net):
        net.train()
        optimizer = torch.optim.SGD(net.parameters(), lr=self.args["lr"], momentum=0.5)
        epoch_loss = []
        for _ in range(self.args["local_ep"]):
            batch_loss = []
            for images, labels in self.ldr_train:
                net.zero_grad()
                log_probs = net(images)
                loss = self.loss_func(log_probs, labels)
                loss.backward()
                optimizer.step()
                batch_loss.append(loss.item())
            epoch_loss.append(sum(batch_loss) / len(batch_loss))
        return net.state_dict(), sum(epoch_loss) / len(epoch_loss)


def fed_avg(w):
    w_avg = copy.deepcopy(w[0])
    for k in w_avg.keys():
        for i in range(1, len(w)):
            w_avg[k] += w[i][k]
        w_avg[k] = torch.div(w_avg[k], len(w))
    return w_avg


def main():
    g = torch.Generator().manual_seed(0)
    protos = torch.randn(10, 64, generator=g)
    y = torch.randint(0, 10, (2000,), generator=g)
    dataset = TensorDataset(protos[y] + 1.5 * torch.randn(2000, 64, generator=g), y)
    dict_users = {i: list(range(i * 200, (i + 1) * 200)) for i in range(10)}
    args = {"local_bs": 50, "local_ep": 1, "lr": 0.01, "frac": 0.3}
    torch.manual_seed(0)
    net_glob = MLP(64, 200, 10)
    for rnd in range(8):
        w_locals, loss_locals = [], []
        for idx in torch.randperm(10, generator=g)[:3].tolist():
            local = LocalUpdate(args, dataset, dict_users[idx])
            w, loss = local.train(copy.deepcopy(net_glob))
            w_locals.append(copy.deepcopy(w))
            loss_locals.append(loss)
        net_glob.load_state_dict(fed_avg(w_locals))
        print(f"round {rnd} average loss {sum(loss_locals) / len(loss_locals):.3f}")


if __name__ == "__main__":
    main()
