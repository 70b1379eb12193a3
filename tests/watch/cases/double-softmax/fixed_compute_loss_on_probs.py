"""A Hugging Face-like trainer: the model returns an output dict with both logits and probs, and
the trainer's compute_loss() method passes outputs["logits"] to F.cross_entropy."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TextClassifier(nn.Module):
    def __init__(self, vocab=100, dim=32, labels=3):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.classifier = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, labels))

    def forward(self, input_ids):
        logits = self.classifier(self.embed(input_ids))
        return {"logits": logits, "probs": logits.softmax(-1)}


class Trainer:
    def __init__(self, model, train_dataset, lr=5e-3, batch_size=32):
        self.model = model
        self.loader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def compute_loss(self, model, inputs):
        outputs = model(inputs["input_ids"])
        return F.cross_entropy(outputs["logits"], inputs["labels"])

    def training_step(self, model, inputs):
        model.train()
        loss = self.compute_loss(model, inputs)
        loss.backward()
        return loss.detach()

    def train(self, epochs):
        for epoch in range(epochs):
            for input_ids, labels in self.loader:
                loss = self.training_step(self.model, {"input_ids": input_ids, "labels": labels})
                self.optimizer.step()
                self.optimizer.zero_grad()
        return float(loss)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (480,), generator=g)
    input_ids = torch.randint(0, 100, (480, 12), generator=g)
    input_ids[:, :4] = labels[:, None] * 30 + torch.randint(0, 30, (480, 4), generator=g)
    trainer = Trainer(TextClassifier(), TensorDataset(input_ids, labels))
    print(f"loss {trainer.train(epochs=4):.3f}")


if __name__ == "__main__":
    main()
