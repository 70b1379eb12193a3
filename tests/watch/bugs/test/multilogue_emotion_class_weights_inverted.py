"""A dialogue emotion classifier trained per emotion as a binary task: a train_or_eval_model(model,
loss_function, dataloader, epoch, optimizer=None, train=False) helper runs a recurrent model over
each conversation's utterance features (text, audio and video concatenated), scores the per-utterance
log-probabilities with a masked, class-weighted NLL loss class and reports accuracy and weighted F1.
The class weights are meant to be the inverse class frequencies, but the two entries are in the wrong
order: for 'fear' (about 8% of utterances positive) the frequent negative class gets weight 1/0.0816
and the rare positive class 1/0.9184, so the weighting pushes the model further toward the majority.

Thread: https://github.com/amanshenoy/multilogue-net/issues/21
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, Dataset


class DialogueEmotions(Dataset):
    def __init__(self, n, seed, pos_rate=0.0816, max_len=16):
        g = torch.Generator().manual_seed(seed)
        direction = torch.randn(48, generator=torch.Generator().manual_seed(5))
        self.items = []
        for _ in range(n):
            length = int(torch.randint(6, max_len + 1, (1,), generator=g))
            label = (torch.rand(length, generator=g) < pos_rate).long()
            feats = torch.randn(length, 48, generator=g) + 0.9 * label[:, None].float() * direction
            self.items.append((feats, label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    @staticmethod
    def collate_fn(batch):
        longest = max(f.size(0) for f, _ in batch)
        feats = torch.zeros(longest, len(batch), 48)
        labels = torch.zeros(len(batch), longest, dtype=torch.long)
        umask = torch.zeros(len(batch), longest)
        for b, (f, y) in enumerate(batch):
            feats[:f.size(0), b] = f
            labels[b, :y.size(0)] = y
            umask[b, :y.size(0)] = 1
        return feats[..., :32], feats[..., 32:40], feats[..., 40:], umask, labels


class MaskedNLLLoss(nn.Module):
    def __init__(self, weight=None):
        super().__init__()
        self.weight = weight
        self.loss = nn.NLLLoss(weight=weight, reduction="sum")

    def forward(self, pred, target, mask):
        mask_ = mask.view(-1, 1)
        if self.weight is None:
            return self.loss(pred * mask_, target) / torch.sum(mask)
        return self.loss(pred * mask_, target) / torch.sum(self.weight[target] * mask_.squeeze())


class CategoricalModel(nn.Module):
    def __init__(self, d_text=32, d_audio=8, d_video=8, hidden=32, n_classes=2, dropout=0.5):
        super().__init__()
        self.proj = nn.Linear(d_text + d_audio + d_video, hidden)
        self.rnn = nn.GRU(hidden, hidden, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.smax_fc = nn.Linear(2 * hidden, n_classes)

    def forward(self, textf, acouf, visuf, umask):
        h = torch.relu(self.proj(torch.cat([textf, acouf, visuf], -1)))
        out, _ = self.rnn(h)
        return F.log_softmax(self.smax_fc(self.dropout(out)), 2)


def weighted_f1(labels, preds, masks):
    score = 0.0
    for c in (0, 1):
        tp = np.sum(masks * ((preds == c) & (labels == c)))
        fp = np.sum(masks * ((preds == c) & (labels != c)))
        fn = np.sum(masks * ((preds != c) & (labels == c)))
        f1 = 2 * tp / max(2 * tp + fp + fn, 1e-9)
        score += f1 * np.sum(masks * (labels == c)) / np.sum(masks)
    return score


def train_or_eval_model(model, loss_function, dataloader, epoch, optimizer=None, train=False):
    losses, preds, labels, masks = [], [], [], []
    assert not train or optimizer is not None
    model.train() if train else model.eval()
    for data in dataloader:
        if train:
            optimizer.zero_grad()
        textf, acouf, visuf, umask, label = data
        with torch.set_grad_enabled(train):
            log_prob = model(textf, acouf, visuf, umask)
            lp_ = log_prob.transpose(0, 1).contiguous().view(-1, log_prob.size(2))
            labels_ = label.view(-1)
            loss = loss_function(lp_, labels_, umask)
        preds.append(torch.argmax(lp_, 1).numpy())
        labels.append(labels_.numpy())
        masks.append(umask.view(-1).numpy())
        losses.append(loss.item() * masks[-1].sum())
        if train:
            loss.backward()
            optimizer.step()
    preds, labels, masks = np.concatenate(preds), np.concatenate(labels), np.concatenate(masks)
    avg_loss = round(float(np.sum(losses) / np.sum(masks)), 4)
    avg_accuracy = round(float(100 * np.sum(masks * (preds == labels)) / np.sum(masks)), 2)
    avg_fscore = round(float(100 * weighted_f1(labels, preds, masks)), 2)
    pos_rate = round(float(100 * np.sum(masks * (preds == 1)) / np.sum(masks)), 2)
    return avg_loss, avg_accuracy, avg_fscore, pos_rate


def main():
    torch.manual_seed(0)
    emotion = "fear"
    model = CategoricalModel()
    if emotion == "anger":
        loss_weights = torch.FloatTensor([1 / 0.2128, 1 / 0.7872])
    elif emotion == "sadness":
        loss_weights = torch.FloatTensor([1 / 0.2546, 1 / 0.7454])
    elif emotion == "fear":
        loss_weights = torch.FloatTensor([1 / 0.0816, 1 / 0.9184])
    loss_function = MaskedNLLLoss(loss_weights)
    optimizer = optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    train_set, test_set = DialogueEmotions(4096, 0), DialogueEmotions(512, 1)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, collate_fn=train_set.collate_fn,
                              generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(test_set, batch_size=128, collate_fn=test_set.collate_fn)
    for e in range(2):
        tr = train_or_eval_model(model, loss_function, train_loader, e, optimizer, True)
        te = train_or_eval_model(model, loss_function, test_loader, e)
        print(f"epoch {e} train loss {tr[0]} acc {tr[1]} f1 {tr[2]} | test loss {te[0]} acc {te[1]} "
              f"f1 {te[2]} predicted positive {te[3]}%")


if __name__ == "__main__":
    main()
