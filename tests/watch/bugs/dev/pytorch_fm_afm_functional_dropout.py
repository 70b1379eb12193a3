"""An attentional factorization machine for click-through prediction, trained by a
train(model, optimizer, data_loader, criterion, device) helper and scored by a
test(model, data_loader, device) helper that calls model.eval() and returns an AUC. The attention
layer drops its scores and its pooled output with F.dropout(..., p) and no training= argument, so
dropout stays on after model.eval(): two evaluations of the same model on the same data give two
different AUCs.

Thread: https://github.com/rixwew/pytorch-fm/issues/21
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class FeaturesEmbedding(nn.Module):
    def __init__(self, field_dims, embed_dim):
        super().__init__()
        self.embedding = nn.Embedding(sum(field_dims), embed_dim)
        nn.init.normal_(self.embedding.weight, std=0.1)
        self.register_buffer("offsets", torch.tensor([0] + list(field_dims[:-1])).cumsum(0))

    def forward(self, x):
        return self.embedding(x + self.offsets)


class FeaturesLinear(nn.Module):
    def __init__(self, field_dims):
        super().__init__()
        self.fc = nn.Embedding(sum(field_dims), 1)
        self.bias = nn.Parameter(torch.zeros(1))
        self.register_buffer("offsets", torch.tensor([0] + list(field_dims[:-1])).cumsum(0))

    def forward(self, x):
        return self.fc(x + self.offsets).sum(dim=1) + self.bias


class AttentionalFactorizationMachine(nn.Module):
    def __init__(self, embed_dim, attn_size, dropouts):
        super().__init__()
        self.attention = nn.Linear(embed_dim, attn_size)
        self.projection = nn.Linear(attn_size, 1)
        self.fc = nn.Linear(embed_dim, 1)
        self.dropouts = dropouts

    def forward(self, x):
        num_fields = x.shape[1]
        row, col = zip(*[(i, j) for i in range(num_fields - 1) for j in range(i + 1, num_fields)])
        inner_product = x[:, list(row)] * x[:, list(col)]
        attn_scores = F.relu(self.attention(inner_product))
        attn_scores = F.softmax(self.projection(attn_scores), dim=1)
        attn_scores = F.dropout(attn_scores, p=self.dropouts[0])
        attn_output = torch.sum(attn_scores * inner_product, dim=1)
        attn_output = F.dropout(attn_output, p=self.dropouts[1])
        return self.fc(attn_output)


class AttentionalFactorizationMachineModel(nn.Module):
    def __init__(self, field_dims, embed_dim, attn_size, dropouts):
        super().__init__()
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.linear = FeaturesLinear(field_dims)
        self.afm = AttentionalFactorizationMachine(embed_dim, attn_size, dropouts)

    def forward(self, x):
        x = self.linear(x) + self.afm(self.embedding(x))
        return torch.sigmoid(x.squeeze(1))


def roc_auc(targets, scores):
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    pos = targets == 1
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    return ((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


def train(model, optimizer, data_loader, criterion, device, log_interval=20):
    model.train()
    total_loss = 0
    for i, (fields, target) in enumerate(data_loader):
        fields, target = fields.to(device), target.to(device)
        y = model(fields)
        loss = criterion(y, target.float())
        model.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        if (i + 1) % log_interval == 0:
            print(f"    loss: {total_loss / log_interval:.4f}")
            total_loss = 0


def test(model, data_loader, device):
    model.eval()
    targets, predicts = [], []
    with torch.no_grad():
        for fields, target in data_loader:
            fields, target = fields.to(device), target.to(device)
            targets.append(target)
            predicts.append(model(fields))
    return roc_auc(torch.cat(targets), torch.cat(predicts))


def ctr_dataset(n, field_dims, seed):
    g = torch.Generator().manual_seed(seed)
    fields = torch.stack([torch.randint(0, d, (n,), generator=g) for d in field_dims], dim=1)
    tables = torch.Generator().manual_seed(123)
    pair_effect = torch.randn(field_dims[0], field_dims[1], generator=tables)
    item_effect = 2.0 * torch.randn(field_dims[2], generator=tables)
    logit = pair_effect[fields[:, 0], fields[:, 1]] + item_effect[fields[:, 2]] - 0.3
    target = (torch.rand(n, generator=g) < torch.sigmoid(logit)).long()
    return TensorDataset(fields, target)


def main():
    torch.manual_seed(0)
    field_dims = [12, 10, 15, 8]
    train_loader = DataLoader(ctr_dataset(4000, field_dims, 0), batch_size=128, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    valid_loader = DataLoader(ctr_dataset(2000, field_dims, 1), batch_size=512)
    model = AttentionalFactorizationMachineModel(field_dims, embed_dim=16, attn_size=16, dropouts=(0.2, 0.2))
    optimizer = torch.optim.Adam(params=model.parameters(), lr=0.01, weight_decay=1e-6)
    criterion = torch.nn.BCELoss()
    for epoch_i in range(3):
        train(model, optimizer, train_loader, criterion, "cpu")
        auc = test(model, valid_loader, "cpu")
        auc_again = test(model, valid_loader, "cpu")
        print(f"epoch: {epoch_i} validation: auc: {auc:.4f} (same model, second pass: {auc_again:.4f})")


if __name__ == "__main__":
    main()
