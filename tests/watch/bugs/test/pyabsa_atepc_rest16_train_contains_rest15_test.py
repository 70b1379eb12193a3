"""Multi-dataset training of an aspect-term-extraction-and-polarity (ATEPC) model in the shape of an
ABSA toolkit: a config lists dataset files under 'train' and 'test' (laptop14, restaurant14,
restaurant15, restaurant16), the trainer concatenates each list, and a BERT-style encoder with a BIO
aspect-tagging head and a polarity head on the [CLS] + aspect features is trained with
ate_loss + apc_loss (AdamW, zero_grad / backward / step) and evaluated per epoch on the concatenated
test files (APC accuracy, ATE token accuracy). The restaurant16 training file already contains the
restaurant15 test sentences with their labels, so a quarter of the reported test set was trained on
and the reported test accuracy is inflated by memorised examples.

Thread: https://github.com/yangheng95/PyABSA/issues/53
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB, SEQ, PAD, CLS = 120, 14, 0, 1
ASPECT_WORDS = range(2, 12)
O, B_ASP = 0, 1


def semeval_file(n, seed, noise=0.3):
    """Sentences with one aspect word; its polarity follows cue words (ids 12-21 positive,
    22-31 negative) but a share of labels is annotator noise that only memorising can fit."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        ids = torch.randint(32, VOCAB, (SEQ,), generator=g)
        ids[0] = CLS
        pos = 1 + int(torch.randint(0, SEQ - 2, (1,), generator=g))
        ids[pos] = ASPECT_WORDS[int(torch.randint(0, 10, (1,), generator=g))]
        polarity = int(torch.randint(0, 2, (1,), generator=g))
        cue = 1 + (pos + 1 + int(torch.randint(0, SEQ - 3, (1,), generator=g))) % (SEQ - 1)
        if cue != pos:
            ids[cue] = (12 if polarity == 1 else 22) + int(torch.randint(0, 10, (1,), generator=g))
        if torch.rand(1, generator=g) < noise:
            polarity = 1 - polarity
        tags = torch.full((SEQ,), O)
        tags[pos] = B_ASP
        rows.append((ids, tags, torch.tensor(pos), torch.tensor(polarity)))
    return rows


laptop14_test, restaurant15_test = semeval_file(120, 11), semeval_file(120, 31)
DATASET_FILES = {
    "laptop14/Laptops_Train": semeval_file(240, 10), "laptop14/Laptops_Test_Gold": laptop14_test,
    "restaurant14/Restaurants_Train": semeval_file(240, 20),
    "restaurant14/Restaurants_Test_Gold": semeval_file(120, 21),
    "restaurant15/restaurant_train": semeval_file(240, 30), "restaurant15/restaurant_test": restaurant15_test,
    "restaurant16/restaurant_train": semeval_file(120, 40) + restaurant15_test,
    "restaurant16/restaurant_test": semeval_file(120, 41),
}

config = {
    "dataset_file": {
        "train": ["laptop14/Laptops_Train", "restaurant14/Restaurants_Train",
                  "restaurant15/restaurant_train", "restaurant16/restaurant_train"],
        "test": ["laptop14/Laptops_Test_Gold", "restaurant14/Restaurants_Test_Gold",
                 "restaurant15/restaurant_test", "restaurant16/restaurant_test"],
    },
    "batch_size": 16, "num_epoch": 8, "learning_rate": 1e-3, "hidden_dim": 48, "dropout": 0.1,
}


class LCF_ATEPC(nn.Module):
    def __init__(self, opt):
        super().__init__()
        d = opt["hidden_dim"]
        self.word = nn.Embedding(VOCAB, d, padding_idx=PAD)
        self.pos = nn.Embedding(SEQ, d)
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=opt["dropout"], batch_first=True)
        self.bert4global = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.dropout = nn.Dropout(opt["dropout"])
        self.ate_head = nn.Linear(d, 2)
        self.dense = nn.Linear(2 * d, 2)

    def forward(self, input_ids, aspect_pos):
        h = self.bert4global(self.word(input_ids) + self.pos(torch.arange(input_ids.size(1))))
        ate_logits = self.ate_head(self.dropout(h))
        aspect = h[torch.arange(len(h)), aspect_pos]
        apc_logits = self.dense(self.dropout(torch.cat([h[:, 0], aspect], -1)))
        return ate_logits, apc_logits


class Instructor:
    def __init__(self, opt):
        self.opt = opt
        train = [r for f in opt["dataset_file"]["train"] for r in DATASET_FILES[f]]
        test = [r for f in opt["dataset_file"]["test"] for r in DATASET_FILES[f]]
        collate = lambda rows: [torch.stack(c) for c in zip(*rows)]
        g = torch.Generator().manual_seed(0)
        self.train_dataloader = DataLoader(train, batch_size=opt["batch_size"], shuffle=True,
                                           collate_fn=collate, generator=g)
        self.test_dataloader = DataLoader(test, batch_size=64, collate_fn=collate)
        self.model = LCF_ATEPC(opt)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=opt["learning_rate"], weight_decay=0.01)
        print(f"train examples {len(train)}, test examples {len(test)}")

    def _evaluate_acc_f1(self):
        self.model.eval()
        apc_correct = ate_correct = n = tokens = 0
        with torch.no_grad():
            for ids, tags, pos, polarity in self.test_dataloader:
                ate_logits, apc_logits = self.model(ids, pos)
                apc_correct += int((apc_logits.argmax(-1) == polarity).sum())
                ate_correct += int((ate_logits.argmax(-1) == tags).sum())
                n, tokens = n + len(ids), tokens + tags.numel()
        self.model.train()
        return apc_correct / n, ate_correct / tokens

    def run(self):
        for epoch in range(self.opt["num_epoch"]):
            self.model.train()
            for ids, tags, pos, polarity in self.train_dataloader:
                self.optimizer.zero_grad()
                ate_logits, apc_logits = self.model(ids, pos)
                loss_ate = F.cross_entropy(ate_logits.reshape(-1, 2), tags.reshape(-1))
                loss_apc = F.cross_entropy(apc_logits, polarity)
                loss = loss_ate + loss_apc
                loss.backward()
                self.optimizer.step()
            apc_acc, ate_acc = self._evaluate_acc_f1()
            print(f"Epoch {epoch} loss {loss.item():.4f} test apc_acc {apc_acc:.4f} ate_acc {ate_acc:.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    Instructor(config).run()
