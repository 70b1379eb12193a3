"""A recommender model class with its own fit(train_loader) method, as in recommendation libraries:
forward() already returns sigmoid(score) and fit() scores it with BCEWithLogitsLoss, which applies
a second sigmoid, so the loss cannot get below about 0.5 for positives and the ranking barely trains.

Thread: https://github.com/yudi-mars/daisyRec/pull/15
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class PointMF(nn.Module):
    def __init__(self, user_num, item_num, factor_num=16, epochs=3, lr=0.01):
        super().__init__()
        self.embed_user = nn.Embedding(user_num, factor_num)
        self.embed_item = nn.Embedding(item_num, factor_num)
        nn.init.normal_(self.embed_user.weight, std=0.01)
        nn.init.normal_(self.embed_item.weight, std=0.01)
        self.epochs, self.lr = epochs, lr

    def forward(self, user, item):
        pred = (self.embed_user(user) * self.embed_item(item)).sum(dim=-1)
        return torch.sigmoid(pred)

    def fit(self, train_loader):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        criterion = nn.BCEWithLogitsLoss(reduction="mean")
        for epoch in range(1, self.epochs + 1):
            self.train()
            current_loss = 0.0
            for user, item, label in train_loader:
                self.zero_grad()
                prediction = self.forward(user, item)
                loss = criterion(prediction, label)
                loss.backward()
                optimizer.step()
                current_loss += loss.item()
            print(f"epoch {epoch} loss {current_loss / len(train_loader):.4f}")


def implicit_feedback(users=200, items=300, n=8192, seed=0):
    g = torch.Generator().manual_seed(seed)
    pu, qi = torch.randn(users, 4, generator=g), torch.randn(items, 4, generator=g)
    u = torch.randint(0, users, (n,), generator=g)
    i = torch.randint(0, items, (n,), generator=g)
    label = ((pu[u] * qi[i]).sum(1) > 0).float()
    return TensorDataset(u, i, label)


def main():
    torch.manual_seed(0)
    loader = DataLoader(implicit_feedback(), batch_size=128, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    PointMF(200, 300).fit(loader)


if __name__ == "__main__":
    main()
