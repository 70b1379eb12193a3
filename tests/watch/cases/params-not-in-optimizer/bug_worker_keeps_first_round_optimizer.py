"""A federated-averaging simulation: each round the server sends every Client a deep copy of the
global model, and Client.fit() builds its SGD optimizer the first time it is called and keeps it.
From the second round on, the optimizer steps the first round's copy, which no forward pass uses
any more, while the copy the client trains gets gradients that nothing applies: every client
returns the weights it was sent, and the global model stops learning after round one."""
import copy

import torch
import torch.nn.functional as F
from torch import nn


class Client:
    def __init__(self, x, y, lr=0.1, batch_size=32):
        self.x, self.y, self.lr, self.batch_size = x, y, lr, batch_size
        self.optimizer = None

    def fit(self, model):
        if self.optimizer is None:
            self.optimizer = torch.optim.SGD(model.parameters(), lr=self.lr)
        for i in range(0, len(self.x), self.batch_size):
            loss = F.cross_entropy(model(self.x[i:i + self.batch_size]), self.y[i:i + self.batch_size])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return model.state_dict(), loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(10, 3, generator=g)
    clients = []
    for _ in range(3):
        x = torch.randn(128, 10, generator=g)
        clients.append(Client(x, (x @ w).argmax(1)))
    global_model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    for rnd in range(6):
        results = [client.fit(copy.deepcopy(global_model)) for client in clients]
        states = [state for state, _ in results]
        global_model.load_state_dict({k: torch.stack([st[k] for st in states]).mean(0) for k in states[0]})
        print(f"round {rnd} loss {sum(loss for _, loss in results) / len(results):.3f}")


if __name__ == "__main__":
    main()
