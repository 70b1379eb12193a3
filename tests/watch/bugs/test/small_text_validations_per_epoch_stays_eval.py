"""A small-text style TransformerBasedClassification wrapper for active-learning text
classification: fit(train_set, validation_set) runs epochs through _train_loop_epoch(), which
calls model.train() once and works out validate_every from validations_per_epoch, then
_train_loop_process_batches() iterates the mini-batches, calling _train_single_batch()
(zero_grad, forward with attention mask, cross-entropy, backward, clip_grad_norm_, step) and a
per-batch scheduler.step(), and every validate_every batches runs validate(), which switches the
model to eval() and scores the validation set; the epoch's train/val loss and accuracy are logged.
The bug: with validations_per_epoch > 1, validate() leaves the model in eval mode and nothing
switches it back, and since the check fires at batch 0, every batch after the first of each
epoch trains with dropout disabled. The run gives no warning; it just trains a differently
regularised (here: over-fitting) model on the small labelled pool than the configuration says.

Thread: https://github.com/webis-de/small-text/issues/40
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyTransformerClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, dim=64, heads=4, layers=2, max_len=32, dropout=0.3):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.pos = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(dim, num_classes)

    def forward(self, x, attention_mask):
        h = self.emb(x) + self.pos(torch.arange(x.shape[1]))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        m = attention_mask.unsqueeze(-1).float()
        pooled = (h * m).sum(1) / m.sum(1)
        return self.classifier(self.dropout(pooled))


class TextDataset:
    def __init__(self, x, masks, y):
        self.x, self.masks, self.y = x, masks, y

    def __len__(self):
        return len(self.y)


def dataloader(ds, batch_size, gen=None, train=True):
    idx = torch.randperm(len(ds), generator=gen) if train else torch.arange(len(ds))
    for s in range(0, len(ds), batch_size):
        b = idx[s:s + batch_size]
        yield ds.x[b], ds.masks[b], ds.y[b]


class TransformerBasedClassification:
    def __init__(self, model, num_classes, num_epochs=25, mini_batch_size=16, lr=1e-3,
                 validations_per_epoch=1, seed=0):
        self.model = model
        self.num_classes = num_classes
        self.num_epochs = num_epochs
        self.mini_batch_size = mini_batch_size
        self.lr = lr
        self.validations_per_epoch = validations_per_epoch
        self.criterion = nn.CrossEntropyLoss()
        self.gen = torch.Generator().manual_seed(seed)

    def fit(self, sub_train, sub_valid):
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=0.01)
        steps_per_epoch = (len(sub_train) + self.mini_batch_size - 1) // self.mini_batch_size
        total = steps_per_epoch * self.num_epochs
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / 20) * max(0.0, 1 - s / total))
        for epoch in range(self.num_epochs):
            train_acc, train_loss, valid_acc, valid_loss = self._train_loop_epoch(
                epoch, sub_train, sub_valid, optimizer, scheduler)
            if epoch % 5 == 4 or epoch == 0:
                print(f"Epoch: {epoch + 1:2d} | Loss: {train_loss:.4f}(train) | Acc: {train_acc * 100:.1f}%(train)"
                      f" | Loss: {valid_loss:.4f}(valid) | Acc: {valid_acc * 100:.1f}%(valid)")
        return self

    def _train_loop_epoch(self, num_epoch, sub_train, sub_valid, optimizer, scheduler):
        self.model.train()
        if self.validations_per_epoch > 1:
            num_batches = (len(sub_train) + self.mini_batch_size - 1) // self.mini_batch_size
            validate_every = max(1, num_batches // self.validations_per_epoch)
        else:
            validate_every = None
        return self._train_loop_process_batches(sub_train, sub_valid, optimizer, scheduler, validate_every)

    def _train_loop_process_batches(self, sub_train, sub_valid, optimizer, scheduler, validate_every=None):
        train_loss, train_acc = 0.0, 0.0
        valid_losses, valid_accs = [], []
        for i, (x, masks, cls) in enumerate(dataloader(sub_train, self.mini_batch_size, self.gen)):
            loss, acc = self._train_single_batch(x, masks, cls, optimizer)
            scheduler.step()
            train_loss += loss * len(cls)
            train_acc += acc
            if validate_every and i % validate_every == 0:
                valid_loss, valid_acc = self.validate(sub_valid)
                valid_losses.append(valid_loss)
                valid_accs.append(valid_acc)
        if validate_every:
            valid_loss = sum(valid_losses) / len(valid_losses)
            valid_acc = sum(valid_accs) / len(valid_accs)
        else:
            valid_loss, valid_acc = self.validate(sub_valid)
        return train_acc / len(sub_train), train_loss / len(sub_train), valid_acc, valid_loss

    def _train_single_batch(self, x, masks, cls, optimizer):
        optimizer.zero_grad()
        logits = self.model(x, attention_mask=masks)
        loss = self.criterion(logits, cls)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        optimizer.step()
        return loss.item(), (logits.argmax(1) == cls).sum().item()

    def validate(self, validation_set):
        self.model.eval()
        loss, acc = 0.0, 0
        with torch.no_grad():
            for x, masks, cls in dataloader(validation_set, 64, train=False):
                logits = self.model(x, attention_mask=masks)
                loss += F.cross_entropy(logits, cls, reduction="sum").item()
                acc += (logits.argmax(1) == cls).sum().item()
        return loss / len(validation_set), acc / len(validation_set)


def make_texts(n, gen, vocab=200, max_len=32, num_classes=3, label_noise=0.15):
    """Variable-length 'documents': each class has a handful of cue words sprinkled into random
    filler; a share of the labels is noisy, as in a small hand-labelled active-learning pool."""
    cues = torch.randperm(vocab - 1, generator=gen)[:num_classes * 6].view(num_classes, 6) + 1
    x = torch.zeros(n, max_len, dtype=torch.long)
    masks = torch.zeros(n, max_len, dtype=torch.long)
    y = torch.randint(0, num_classes, (n,), generator=gen)
    for i in range(n):
        length = int(torch.randint(8, max_len + 1, (1,), generator=gen))
        doc = torch.randint(1, vocab, (length,), generator=gen)
        k = int(torch.randint(1, 3, (1,), generator=gen))
        pos = torch.randperm(length, generator=gen)[:k]
        doc[pos] = cues[y[i], torch.randint(0, 6, (k,), generator=gen)]
        x[i, :length], masks[i, :length] = doc, 1
    flip = torch.rand(n, generator=gen) < label_noise
    y = torch.where(flip, torch.randint(0, num_classes, (n,), generator=gen), y)
    return x, masks, y


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    x, masks, y = make_texts(700, gen)
    train = TextDataset(x[:200], masks[:200], y[:200])
    valid = TextDataset(x[200:], masks[200:], y[200:])
    model = TinyTransformerClassifier(vocab_size=200, num_classes=3)
    clf = TransformerBasedClassification(model, num_classes=3, num_epochs=25, validations_per_epoch=2)
    clf.fit(train, valid)
    final_loss, final_acc = clf.validate(valid)
    print(f"final validation: loss {final_loss:.4f}, accuracy {final_acc * 100:.1f}%")


if __name__ == "__main__":
    main()
