"""
Shape: BertHeadClassifier(nn.Module) whose forward returns torch.softmax of a linear head over the pooled output; main() in train.py builds it with .to(device), transformers AdamW and nn.CrossEntropyLoss, rebuilds the train DataLoader each epoch, model.zero_grad() per batch.
Bug: forward() returns torch.softmax(scores, dim=1) and that output is fed to nn.CrossEntropyLoss, so softmax is applied twice and the loss barely moves.
Thread: https://github.com/illiterate/BertClassifier/issues/2
"""
import torch
import torch.nn as nn
import torch.utils.data as tud
from tqdm import tqdm
from transformers import AdamW, BertConfig, BertModel

from dataset import NewsDataset


class BertHeadClassifier(nn.Module):
    def __init__(self, cfg, n_classes):
        super().__init__()
        self.encoder = BertModel(config=cfg)
        self.head = nn.Linear(cfg.hidden_size, n_classes)

    def forward(self, ids, attn, segs):
        encoded = self.encoder(input_ids=ids, attention_mask=attn, token_type_ids=segs)
        pooled = encoded[1]
        scores = self.head(pooled)
        return torch.softmax(scores, dim=1)


def main():
    batch_size = 4
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    epochs = 10
    lr = 5e-6

    train_set = NewsDataset("data/news/train.txt")
    valid_set = NewsDataset("data/news/val.txt")
    valid_loader = tud.DataLoader(valid_set, batch_size=batch_size, shuffle=False)

    config = BertConfig.from_pretrained("bert-base-chinese")
    model = BertHeadClassifier(config, len(train_set.labels)).to(dev)

    optimizer = AdamW(model.parameters(), lr=lr)
    ce_loss = nn.CrossEntropyLoss()

    for epoch in range(1, epochs + 1):
        model.train()
        train_loader = tud.DataLoader(train_set, batch_size=batch_size, shuffle=True)
        bar = tqdm(train_loader)
        running = 0.0
        for ids, segs, attn, labels in bar:
            model.zero_grad()
            probs = model(
                ids=ids.to(dev),
                attn=attn.to(dev),
                segs=segs.to(dev),
            )
            loss = ce_loss(probs, labels.to(dev))
            running += loss.item()
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=loss.item())

        model.eval()
        val_total = 0.0
        for ids, segs, attn, labels in valid_loader:
            probs = model(
                ids=ids.to(dev),
                attn=attn.to(dev),
                segs=segs.to(dev),
            )
            val_total += ce_loss(probs, labels.to(dev)).item()
        print(epoch, running / len(train_loader), val_total / len(valid_loader))


if __name__ == "__main__":
    main()
