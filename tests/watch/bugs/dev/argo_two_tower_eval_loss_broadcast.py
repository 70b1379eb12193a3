"""A two-tower rating model (user and item embedding tables, a small MLP tower on each side with
dropout, a merge MLP that maps the concatenated tower outputs to one score of shape [B, 1]) trained
by an EmbeddingTrainer class: the constructor builds the train/eval DataLoaders, MSELoss and AdamW;
train(num_epochs) squeezes the prediction to [B] before the loss; eval() sums the per-batch eval
loss and returns it, and the driver runs a few trials and keeps the item embeddings of the trial
with the lowest eval loss. eval() does not squeeze: the [B, 1] prediction and the [B] ratings
broadcast to a [B, B] grid inside MSELoss, so the reported eval loss compares every prediction with
every rating of the batch and the trial selection is made on that number.

Thread: https://github.com/pyemma/Argo/pull/27
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class TwoTowerModel(nn.Module):
    def __init__(self, n_users=400, n_items=300, dim=16):
        super().__init__()
        self.item_cardinality = n_items
        self.user_embedding = nn.Embedding(n_users, dim)
        self.item_embedding = nn.Embedding(n_items, dim)
        self.user_tower = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 32))
        self.item_tower = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 32))
        self.merge_net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, user_ids, item_ids):
        u = self.user_tower(self.user_embedding(user_ids))
        v = self.item_tower(self.item_embedding(item_ids))
        return self.merge_net(torch.cat([u, v], dim=-1))  # [B, 1]


class EmbeddingTrainer:
    def __init__(self, model, train_dataset, eval_dataset, seed):
        self.model = model
        g = torch.Generator().manual_seed(seed)
        self.train_dataloader = DataLoader(train_dataset, batch_size=256, shuffle=True, generator=g)
        self.eval_dataloader = DataLoader(eval_dataset, batch_size=128)
        self.loss = nn.MSELoss()
        self.optimizer = optim.AdamW(self.model.parameters(), lr=0.003)

    def train(self, num_epochs=1):
        for epoch in range(num_epochs):
            self.model.train()
            running = 0.0
            for i, (user_ids, item_ids, ratings) in enumerate(self.train_dataloader):
                self.optimizer.zero_grad()
                predictions = self.model(user_ids, item_ids).squeeze(1)
                loss = self.loss(predictions, ratings)
                loss.backward()
                self.optimizer.step()
                running += loss.item()
                if i % 10 == 9:
                    print(f"epoch {epoch + 1} step {i + 1}/{len(self.train_dataloader)} train loss {running / 10:.4f}")
                    running = 0.0

    def eval(self):
        self.model.eval()
        total_loss = 0.0
        with torch.no_grad():
            for user_ids, item_ids, ratings in self.eval_dataloader:
                predictions = self.model(user_ids, item_ids)
                total_loss += self.loss(predictions, ratings).item()
        print(f"total evaluation loss: {total_loss:.4f}")
        return total_loss

    def export(self):
        self.model.eval()
        with torch.no_grad():
            ids = torch.arange(self.model.item_cardinality)
            return self.model.item_tower(self.model.item_embedding(ids))


def make_ratings(n_users=400, n_items=300, n=9000, seed=0):
    g = torch.Generator().manual_seed(seed)
    pu, qi = torch.randn(n_users, 4, generator=g), torch.randn(n_items, 4, generator=g)
    bu, bi = 0.3 * torch.randn(n_users, generator=g), 0.5 * torch.randn(n_items, generator=g)
    users = torch.randint(0, n_users, (n,), generator=g)
    items = torch.randint(0, n_items, (n,), generator=g)
    score = 3.5 + bu[users] + bi[items] + 0.5 * (pu[users] * qi[items]).sum(1) + 0.3 * torch.randn(n, generator=g)
    ratings = score.clamp(0.5, 5.0)
    n_eval = int(0.05 * n)
    train = TensorDataset(users[n_eval:], items[n_eval:], ratings[n_eval:])
    evals = TensorDataset(users[:n_eval], items[:n_eval], ratings[:n_eval])
    return train, evals


def main():
    torch.manual_seed(0)
    train_dataset, eval_dataset = make_ratings()
    best_embeddings, best_loss = None, None
    for trial in range(3):
        model = TwoTowerModel()
        trainer = EmbeddingTrainer(model, train_dataset, eval_dataset, seed=trial)
        trainer.train(num_epochs=1)
        loss = trainer.eval()
        if best_loss is None or loss < best_loss:
            best_loss, best_embeddings = loss, trainer.export()
            print(f"trial {trial}: new best eval loss {best_loss:.4f}")
    print("kept item embeddings", tuple(best_embeddings.shape))


if __name__ == "__main__":
    main()
