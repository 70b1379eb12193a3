"""A grid-tagging aspect/opinion pair extractor on top of a BERT-style encoder, in the shape of a
research repository's BERT variant: MultiInferBert holds the encoder, a cls_linear over
concatenated (token_i, token_j) features and a feature_linear used by multi_hops() to refine the
grid features from the previous hop's logits; forward() returns the last hop's logits [B, L, L, C].
train(args) loads instances into a DataIterator with get_batch(j), builds Adam with two parameter
groups, model.bert and model.cls_linear, and runs cross_entropy(ignore_index=-1) over the flattened
upper-triangular grid with zero_grad / backward / step; eval() switches to eval mode and back per
epoch. The optimizer groups leave out model.feature_linear, which every forward pass goes through
(nhops=1), so it keeps its random initialisation for the whole run.

Thread: https://github.com/NJUNLP/GTS/issues/13
"""
from argparse import Namespace

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD, CLS = 40, 0, 1
ASPECT_IDS, OPINION_IDS = range(2, 7), range(7, 12)


class TinyBert(nn.Module):
    """Stand-in for the pretrained encoder: returns (sequence_output, pooled_output)."""

    def __init__(self, dim, max_len):
        super().__init__()
        self.word = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.pos = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, tokens, masks):
        h = self.word(tokens) + self.pos(torch.arange(tokens.size(1)))
        h = self.encoder(h, src_key_padding_mask=masks == 0)
        return h, h[:, 0]


class MultiInferBert(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.bert = TinyBert(args.bert_feature_dim, args.max_sequence_len)
        self.cls_linear = nn.Linear(args.bert_feature_dim * 2, args.class_num)
        self.feature_linear = nn.Linear(args.bert_feature_dim * 2 + args.class_num * 3,
                                        args.bert_feature_dim * 2)
        self.dropout_output = nn.Dropout(0.1)

    def multi_hops(self, features, mask, k):
        length = features.shape[1]
        pair_mask = (mask.unsqueeze(1) * mask.unsqueeze(2)).triu().unsqueeze(3).float()
        logits = self.cls_linear(features)
        logits_list = [logits]
        for _ in range(k):
            probs = logits
            masked = probs * pair_mask
            row_max = masked.max(dim=1)[0]
            col_max = masked.max(dim=2)[0]
            summary = torch.max(row_max, col_max).unsqueeze(2).expand(-1, -1, length, -1)
            summary = torch.cat([summary, summary.transpose(1, 2)], dim=3)
            features = self.feature_linear(torch.cat([features, summary, probs], dim=3))
            logits = self.cls_linear(features)
            logits_list.append(logits)
        return logits_list

    def forward(self, tokens, masks):
        seq, _ = self.bert(tokens, masks)
        seq = self.dropout_output(seq)
        length = seq.shape[1]
        grid = seq.unsqueeze(2).expand(-1, -1, length, -1)
        features = torch.cat([grid, grid.transpose(1, 2)], dim=3)
        return self.multi_hops(features, masks, self.args.nhops)[-1]


def load_data_instances(n, args, seed):
    """Sentences with aspect words (ids 2-6) and opinion words (7-11); tags on the upper triangle:
    0 none, 1 aspect, 2 opinion, 3 aspect-opinion pair; lower triangle and padding are -1."""
    g = torch.Generator().manual_seed(seed)
    L = args.max_sequence_len
    instances = []
    for _ in range(n):
        length = int(torch.randint(6, L + 1, (1,), generator=g))
        tokens = torch.full((L,), PAD)
        tokens[0] = CLS
        tokens[1:length] = torch.randint(12, VOCAB, (length - 1,), generator=g)
        slots = 1 + torch.randperm(length - 1, generator=g)[:2]
        tokens[slots[0]] = ASPECT_IDS[int(torch.randint(0, 5, (1,), generator=g))]
        if torch.rand(1, generator=g) < 0.7:
            tokens[slots[1]] = OPINION_IDS[int(torch.randint(0, 5, (1,), generator=g))]
        is_a = (tokens >= 2) & (tokens <= 6)
        is_o = (tokens >= 7) & (tokens <= 11)
        tags = torch.full((L, L), -1)
        for i in range(1, length):
            for j in range(i, length):
                if i == j:
                    tags[i, j] = 1 if is_a[i] else 2 if is_o[i] else 0
                else:
                    tags[i, j] = 3 if (is_a[i] and is_o[j]) or (is_o[i] and is_a[j]) else 0
        instances.append((tokens, (tokens != PAD).long(), tags))
    return instances


class DataIterator:
    def __init__(self, instances, args):
        self.instances, self.args = instances, args
        self.batch_count = (len(instances) + args.batch_size - 1) // args.batch_size

    def get_batch(self, index):
        chunk = self.instances[index * self.args.batch_size:(index + 1) * self.args.batch_size]
        tokens, masks, tags = (torch.stack(t) for t in zip(*chunk))
        return tokens, masks, tags


def eval(model, dataset, args):
    model.eval()
    tp = fp = fn = 0
    with torch.no_grad():
        for i in range(dataset.batch_count):
            tokens, masks, tags = dataset.get_batch(i)
            preds = model(tokens, masks).argmax(dim=3)
            valid = tags != -1
            tp += int(((preds == 3) & (tags == 3) & valid).sum())
            fp += int(((preds == 3) & (tags != 3) & valid).sum())
            fn += int(((preds != 3) & (tags == 3) & valid).sum())
    precision = tp / max(1, tp + fp)
    recall = tp / max(1, tp + fn)
    f1 = 2 * precision * recall / max(1e-9, precision + recall)
    print(f"{args.task}\tP:{precision:.5f}\tR:{recall:.5f}\tF1:{f1:.5f}")
    model.train()
    return precision, recall, f1


def train(args):
    trainset = DataIterator(load_data_instances(480, args, seed=0), args)
    devset = DataIterator(load_data_instances(160, args, seed=1), args)
    model = MultiInferBert(args)

    optimizer = torch.optim.Adam([
        {"params": model.bert.parameters(), "lr": args.lr},
        {"params": model.cls_linear.parameters()},
    ], lr=args.lr)

    best_joint_f1 = 0
    for epoch in range(args.epochs):
        print(f"Epoch:{epoch}")
        for j in range(trainset.batch_count):
            tokens, masks, tags = trainset.get_batch(j)
            preds = model(tokens, masks)
            preds_flatten = preds.reshape([-1, preds.shape[3]])
            tags_flatten = tags.reshape([-1])
            loss = F.cross_entropy(preds_flatten, tags_flatten, ignore_index=-1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"  last batch loss {loss.item():.4f}")
        _, _, joint_f1 = eval(model, devset, args)
        best_joint_f1 = max(best_joint_f1, joint_f1)
    print(f"best dev {args.task} f1: {best_joint_f1:.5f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    train(Namespace(task="pair", max_sequence_len=12, bert_feature_dim=32, nhops=1, batch_size=16,
                    epochs=6, class_num=4, lr=1e-3))
