"""A FARM-style AdaptiveModel (a language-model stand-in plus a list of prediction heads) trained by a
Trainer that calls model.logits_to_loss(); the RegressionHead squeezes its logits to (B,) while the
processor stores labels as (B, 1), so MSELoss broadcasts to (B, B) and the head learns the mean.

Thread: https://github.com/deepset-ai/FARM/issues/229
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LanguageModel(nn.Module):
    def __init__(self, vocab=200, dim=32):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.proj = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())

    def forward(self, input_ids):
        return self.proj(self.embed(input_ids))


class RegressionHead(nn.Module):
    def __init__(self, layer_dims):
        super().__init__()
        self.feed_forward = nn.Linear(*layer_dims)
        self.loss_fct = nn.MSELoss(reduction="none")

    def forward(self, x):
        return self.feed_forward(x).squeeze(-1)

    def logits_to_loss(self, logits, label_ids):
        return self.loss_fct(logits, label_ids.float())


class AdaptiveModel(nn.Module):
    def __init__(self, language_model, prediction_heads):
        super().__init__()
        self.language_model = language_model
        self.prediction_heads = nn.ModuleList(prediction_heads)

    def forward(self, input_ids):
        pooled = self.language_model(input_ids)
        return [head(pooled) for head in self.prediction_heads]

    def logits_to_loss(self, logits, label_ids):
        losses = [head.logits_to_loss(lg, label_ids) for head, lg in zip(self.prediction_heads, logits)]
        return sum(loss.mean() for loss in losses)


class Trainer:
    def __init__(self, model, optimizer, data_loader, epochs):
        self.model, self.optimizer, self.data_loader, self.epochs = model, optimizer, data_loader, epochs

    def train(self):
        for epoch in range(self.epochs):
            self.model.train()
            for input_ids, label_ids in self.data_loader:
                logits = self.model(input_ids)
                loss = self.model.logits_to_loss(logits, label_ids)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
            print(f"epoch {epoch} train loss {loss.item():.3f}")


def regression_docs(n=1024, seq=12, vocab=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, seq), generator=g)
    score = torch.linspace(0, 16, vocab)[ids].mean(1, keepdim=True)  # labels range 0..16
    score = (score - score.mean()) / score.std() * 4 + 8
    return TensorDataset(ids, score)  # the processor stores one label column: (N, 1)


def main():
    torch.manual_seed(0)
    model = AdaptiveModel(LanguageModel(), [RegressionHead([32, 1])])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = DataLoader(regression_docs(), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    Trainer(model, optimizer, loader, epochs=3).train()


if __name__ == "__main__":
    main()
