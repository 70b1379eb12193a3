"""The same tabular classifier with the label field converted before the comparison,
`1.0 if int(row["label"]) == 1 else 0.0`: both classes reach the loss."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def csv_rows(n, seed):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        x = torch.randn(6, generator=g)
        label = int(x[0] + 0.5 * x[1] > 0)
        rows.append({**{f"f{i}": f"{float(v):.4f}" for i, v in enumerate(x)}, "label": str(label)})
    return rows


class RowDataset(Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        features = torch.tensor([float(row[f"f{k}"]) for k in range(6)])
        target = torch.tensor(1.0 if int(row["label"]) == 1 else 0.0)
        return features, target


def train_epoch(model, loader, criterion, optimizer):
    model.train()
    for features, target in loader:
        optimizer.zero_grad()
        loss = criterion(model(features).squeeze(1), target)
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    loader = DataLoader(RowDataset(csv_rows(2048, 0)), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(model, loader, criterion, optimizer):.4f}")


if __name__ == "__main__":
    main()
