"""
Shape: models module (MLP ending in an nn.Softmax(dim=1) attribute, CNNMnist ending in log_softmax) chosen by args.model; a LocalUpdate class holding per-client loaders and self.criterion = nn.NLLLoss().to(device), whose update_weights(model, global_round) builds SGD/Adam and runs local epochs; federated main loop deep-copies the global model per client and averages state dicts.
Bug: with --model mlp the network's output is softmax probabilities, which self.criterion (NLLLoss) treats as log-probabilities, so the loss is -p of the true class (always negative).
Thread: https://github.com/AshwinRJ/Federated-Learning-PyTorch/issues/30
"""
import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from options import args_parser
from utils import get_dataset


class MLP(nn.Module):
    def __init__(self, dim_in, dim_hidden, dim_out):
        super(MLP, self).__init__()
        self.layer_input = nn.Linear(dim_in, dim_hidden)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout()
        self.layer_hidden = nn.Linear(dim_hidden, dim_out)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = x.view(-1, x.shape[1] * x.shape[-2] * x.shape[-1])
        x = self.relu(self.dropout(self.layer_input(x)))
        x = self.layer_hidden(x)
        return self.softmax(x)


class CNNMnist(nn.Module):
    def __init__(self, args):
        super(CNNMnist, self).__init__()
        self.conv1 = nn.Conv2d(args.num_channels, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, args.num_classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, x.shape[1] * x.shape[2] * x.shape[3])
        x = F.dropout(F.relu(self.fc1(x)), training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


class DatasetSplit(Dataset):
    def __init__(self, dataset, idxs):
        self.dataset = dataset
        self.idxs = [int(i) for i in idxs]

    def __len__(self):
        return len(self.idxs)

    def __getitem__(self, item):
        image, label = self.dataset[self.idxs[item]]
        return torch.tensor(image), torch.tensor(label)


class LocalUpdate(object):
    def __init__(self, args, dataset, idxs):
        self.args = args
        self.trainloader, self.testloader = self.split_loaders(dataset, list(idxs))
        self.device = "cuda" if args.gpu else "cpu"
        self.criterion = nn.NLLLoss().to(self.device)

    def split_loaders(self, dataset, idxs):
        cut = int(0.9 * len(idxs))
        train = DataLoader(DatasetSplit(dataset, idxs[:cut]), batch_size=self.args.local_bs, shuffle=True)
        test = DataLoader(DatasetSplit(dataset, idxs[cut:]), batch_size=max(1, int(len(idxs[cut:]) / 10)), shuffle=False)
        return train, test

    def update_weights(self, model, global_round):
        model.train()
        epoch_loss = []
        if self.args.optimizer == "sgd":
            optimizer = torch.optim.SGD(model.parameters(), lr=self.args.lr, momentum=0.5)
        elif self.args.optimizer == "adam":
            optimizer = torch.optim.Adam(model.parameters(), lr=self.args.lr, weight_decay=1e-4)
        for _ in range(self.args.local_ep):
            batch_loss = []
            for images, labels in self.trainloader:
                images, labels = images.to(self.device), labels.to(self.device)
                model.zero_grad()
                out = model(images)
                loss = self.criterion(out, labels)
                loss.backward()
                optimizer.step()
                batch_loss.append(loss.item())
            epoch_loss.append(sum(batch_loss) / len(batch_loss))
        return model.state_dict(), sum(epoch_loss) / len(epoch_loss)

    def inference(self, model):
        model.eval()
        total_loss, correct, seen = 0.0, 0.0, 0.0
        for images, labels in self.testloader:
            images, labels = images.to(self.device), labels.to(self.device)
            out = model(images)
            total_loss += self.criterion(out, labels).item()
            correct += torch.sum(torch.eq(torch.max(out, 1)[1].view(-1), labels)).item()
            seen += len(labels)
        return correct / seen, total_loss


def average_weights(states):
    avg = copy.deepcopy(states[0])
    for key in avg.keys():
        for s in states[1:]:
            avg[key] += s[key]
        avg[key] = torch.div(avg[key], len(states))
    return avg


if __name__ == "__main__":
    args = args_parser()
    device = "cuda" if args.gpu else "cpu"
    train_dataset, test_dataset, user_groups = get_dataset(args)

    if args.model == "cnn":
        global_model = CNNMnist(args=args)
    elif args.model == "mlp":
        flat = 1
        for d in train_dataset[0][0].shape:
            flat *= d
        global_model = MLP(dim_in=flat, dim_hidden=64, dim_out=args.num_classes)
    else:
        raise SystemExit("unknown model")

    global_model.to(device)
    global_model.train()
    train_loss = []
    for rnd in range(args.epochs):
        local_weights, local_losses = [], []
        global_model.train()
        m = max(int(args.frac * args.num_users), 1)
        for idx in np.random.choice(range(args.num_users), m, replace=False):
            client = LocalUpdate(args=args, dataset=train_dataset, idxs=user_groups[idx])
            w, loss = client.update_weights(model=copy.deepcopy(global_model), global_round=rnd)
            local_weights.append(copy.deepcopy(w))
            local_losses.append(copy.deepcopy(loss))
        global_model.load_state_dict(average_weights(local_weights))
        train_loss.append(sum(local_losses) / len(local_losses))
