"""A dynamic meta-embeddings sentence classifier in the style of a research code base: a
ProjSumEmbedder looks words up in several frozen "pretrained" embedding tables, projects each to a
common size, mixes them with a per-token softmax attention over the embedding sets, applies ReLU and
embedding dropout; a SentEncoder runs a BiLSTM over the packed time-major batch and max-pools over
time; a TextClassificationModel adds an MLP classifier with nn.Dropout. A TextClassificationTask
object holds model, criterion (summed CrossEntropyLoss), Adam optimizer and ReduceLROnPlateau on dev
accuracy, with batch_forward(epoch, batch, batch_idx) returning the loss and per-epoch train stats,
and evaluate(data_iter, split, epoch) that calls model.eval() and reports loss/accuracy; the main
loop trains, evaluates dev each epoch, keeps the best checkpoint with early stopping, and finally
re-evaluates the best checkpoint on dev and test. The bug: the embedder applies its dropout as
F.dropout(out, p=args.emb_dropout) (emb_dropout 0.5, as in the SST-2 configuration) without
training=self.training, so model.eval() cannot switch it off: every dev/test evaluation still drops
half of the mixed word embeddings at random, the accuracies that drive the LR schedule, early
stopping and checkpoint choice are those of a damaged model, and the best checkpoint re-evaluated on
dev gives a different accuracy from the one that selected it.

Thread: https://github.com/facebookresearch/DME/issues/3
"""
import copy
from argparse import Namespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import ReduceLROnPlateau

VOCAB, PAD = 300, 0


class SingleEmbedder(nn.Module):
    def __init__(self, args, table):
        super().__init__()
        self.embedder = nn.Embedding.from_pretrained(table, freeze=True, padding_idx=PAD)

    def forward(self, x):
        return self.embedder(x)


class ProjSumEmbedder(nn.Module):
    def __init__(self, args, tables):
        super().__init__()
        self.args = args
        self.emb_names = sorted(tables)
        self.n_emb = len(tables)
        self.emb_sz = args.proj_embed_sz
        self.embedders = nn.ModuleDict({n: SingleEmbedder(args, t) for n, t in tables.items()})
        self.projectors = nn.ModuleDict({n: nn.Linear(t.shape[1], args.proj_embed_sz) for n, t in tables.items()})
        self.attn_0 = nn.Linear(args.proj_embed_sz, 2)
        self.attn_1 = nn.Linear(2, 1)

    def forward(self, words):
        projected = [self.projectors[n](self.embedders[n](words)) for n in self.emb_names]
        projected_cat = torch.cat([p.unsqueeze(2) for p in projected], 2)  # (s_len, b, n_emb, d)
        s_len, b_size, _, _ = projected_cat.size()
        m_attn = F.softmax(self.attn_1(self.attn_0(projected_cat)).squeeze(3), dim=2)
        out = (projected_cat * m_attn.view(s_len, b_size, self.n_emb, 1)).sum(2)
        if self.args.nonlin == "relu":
            out = F.relu(out)
        if self.args.emb_dropout > 0.0:
            out = F.dropout(out, p=self.args.emb_dropout)
        return out


class SentEncoder(nn.Module):
    def __init__(self, args, tables):
        super().__init__()
        self.embedder = ProjSumEmbedder(args, tables)
        self.rnn = nn.LSTM(self.embedder.emb_sz, args.rnn_dim, bidirectional=True)

    def forward(self, words, seq_lens):
        emb = self.embedder(words)
        seq_lens, idx_sort = torch.sort(seq_lens, descending=True)
        _, idx_unsort = torch.sort(idx_sort)
        packed = nn.utils.rnn.pack_padded_sequence(emb.index_select(1, idx_sort), seq_lens)
        out = nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], padding_value=-1e4)[0]
        return out.index_select(1, idx_unsort).max(0)[0]


class TextClassificationModel(nn.Module):
    def __init__(self, args, tables):
        super().__init__()
        self.encoder = SentEncoder(args, tables)
        self.classifier = nn.Sequential(
            nn.Linear(2 * args.rnn_dim, args.fc_dim), nn.ReLU(), nn.Dropout(p=args.clf_dropout),
            nn.Linear(args.fc_dim, args.fc_dim), nn.ReLU(), nn.Dropout(p=args.clf_dropout),
            nn.Linear(args.fc_dim, args.n_classes))

    def forward(self, batch):
        return self.classifier(self.encoder(batch.text[0], batch.text[1]))


class TextClassificationTask:
    def __init__(self, args, tables):
        self.args = args
        self.model = TextClassificationModel(args, tables)
        self.criterion = nn.CrossEntropyLoss(reduction="sum")
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=args.lr)
        self.scheduler = ReduceLROnPlateau(self.optimizer, "max", factor=0.2, min_lr=args.lr_min, patience=0)
        self.reset_epoch_train_stats()

    def reset_epoch_train_stats(self):
        self.epoch_train_stats = {"loss": [], "n_correct": 0, "n_total": 0}

    def batch_forward(self, epoch, batch, batch_idx):
        if batch_idx == 0:
            self.reset_epoch_train_stats()
        answer = self.model(batch)
        loss = self.criterion(answer, batch.label)
        self.epoch_train_stats["n_correct"] += float((answer.max(1)[1] == batch.label).sum().item())
        self.epoch_train_stats["n_total"] += batch.batch_size
        self.epoch_train_stats["loss"].append(loss.item() / batch.batch_size)
        return loss

    def report_train_stats(self, epoch):
        s = self.epoch_train_stats
        print(f"Epoch {epoch} training loss {np.mean(s['loss']):.6f}, acc: {100. * s['n_correct'] / s['n_total']:.2f}")

    def evaluate(self, data_iter, split, epoch):
        stats = {"n_correct": 0.0, "n_total": 0, "loss": 0.0}
        self.model.eval()
        with torch.no_grad():
            for batch in data_iter:
                answer = self.model(batch)
                stats["n_correct"] += float((answer.max(1)[1] == batch.label).sum().item())
                stats["n_total"] += batch.batch_size
                stats["loss"] += self.criterion(answer, batch.label).item()
        acc = 100. * stats["n_correct"] / stats["n_total"]
        print(f"{split} loss {stats['loss'] / stats['n_total']:.6f}, acc: {acc:.4f}")
        return acc, stats


def make_split(n, sentiment, gen):
    """SST-2-like: a sentence is positive when its sentiment words sum above zero."""
    lens = torch.randint(6, 16, (n,), generator=gen)
    words = torch.randint(1, VOCAB, (n, 16), generator=gen)
    words[torch.arange(16)[None, :] >= lens[:, None]] = PAD
    score = sentiment[words].sum(1) + 0.5 * torch.rand(n, generator=gen) - 0.25  # ties broken at random
    return words, lens, (score > 0).long()


def iterate(split, batch_sz, shuffle, gen=None):
    words, lens, labels = split
    order = torch.randperm(len(labels), generator=gen) if shuffle else torch.arange(len(labels))
    for s in range(0, len(labels), batch_sz):
        i = order[s:s + batch_sz]
        ln = lens[i]
        yield Namespace(text=(words[i, :int(ln.max())].t().contiguous(), ln), label=labels[i], batch_size=len(i))


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    sentiment = torch.zeros(VOCAB)
    sentiment[1:101] = 1.0
    sentiment[101:201] = -1.0
    # two "pretrained" embedding sets that each carry part of the sentiment signal
    tables = {}
    for name, dim, frac in (("fasttext", 24, 1.5), ("glove", 20, 1.0)):
        t = torch.randn(VOCAB, dim, generator=gen) * 0.5
        t[:, 0] += frac * sentiment
        t[PAD] = 0
        tables[name] = t
    train, dev, test = (make_split(n, sentiment, gen) for n in (1600, 400, 400))
    args = Namespace(proj_embed_sz=32, nonlin="relu", emb_dropout=0.5, rnn_dim=32, fc_dim=32, n_classes=2,
                     clf_dropout=0.5, lr=0.005, lr_min=0.0002, batch_sz=64, max_epochs=6, early_stop_patience=3)
    task = TextClassificationTask(args, tables)

    best_acc, best_state, bad_epochs = None, None, 0
    for epoch in range(args.max_epochs):
        task.model.train()
        for batch_idx, batch in enumerate(iterate(train, args.batch_sz, True, gen)):
            task.optimizer.zero_grad()
            loss = task.batch_forward(epoch, batch, batch_idx)
            (loss / batch.batch_size).backward()
            task.optimizer.step()
        task.report_train_stats(epoch)
        dev_acc, _ = task.evaluate(iterate(dev, args.batch_sz, False), "dev", epoch)
        task.scheduler.step(dev_acc)
        if best_acc is None or dev_acc > best_acc:
            best_acc, best_state, bad_epochs = dev_acc, copy.deepcopy(task.model.state_dict()), 0
        else:
            bad_epochs += 1
            if bad_epochs >= args.early_stop_patience:
                break
    print(f"best dev acc {best_acc:.4f}; reloading the best checkpoint")
    task.model.load_state_dict(best_state)
    task.evaluate(iterate(dev, args.batch_sz, False), "best dev", -1)
    task.evaluate(iterate(test, args.batch_sz, False), "test", -1)


if __name__ == "__main__":
    main()
