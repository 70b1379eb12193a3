"""A SPLADE-style sparse encoder (token logits over the vocabulary, log(1 + relu), max pooling
over tokens) trained on sentence pairs with float similarity labels through a
SparseCoSENTLoss(model, scale=20.0) and a SparseEncoderTrainer-like class whose compute_loss
calls the loss on the two columns. CoSENT needs one score per pair, but the loss's default
similarity_fct is the full cos_sim matrix, so scores come out (B, B) instead of (B,):
scores[:, None] - scores[None, :] becomes a (B, B, B) tensor, the (B, B) label mask broadcasts
against its last two axes, and the ranking terms compare rows of the cross-pair matrix instead
of the pairs' own similarities. The objective is silently a different one; nothing raises.

Thread: https://github.com/huggingface/sentence-transformers/pull/3868
"""
import torch
import torch.nn.functional as F
from torch import nn

TOPICS, WORDS, SEQ, VOCAB = 40, 12, 10, 1 + 40 * 12


def cos_sim(a, b):
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


def pairwise_cos_sim(a, b):
    return (F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(-1)


class ScoredPairs:
    """label = fraction of topic words shared by the two sentences' topic mixtures."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t1 = torch.randint(0, TOPICS, (n,), generator=g)
        self.label = torch.randint(0, 6, (n,), generator=g).float() / 5.0
        other = (t1 + torch.randint(1, TOPICS, (n,), generator=g)) % TOPICS
        mix = torch.rand(n, SEQ, generator=g) < self.label.unsqueeze(1)
        self.sentence1 = self._words(t1.unsqueeze(1).expand(n, SEQ), g)
        self.sentence2 = self._words(torch.where(mix, t1.unsqueeze(1), other.unsqueeze(1)), g)

    @staticmethod
    def _words(topic, g):
        return 1 + topic * WORDS + torch.randint(0, WORDS, topic.shape, generator=g)

    def __len__(self):
        return len(self.label)


class SpladeEncoder(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, dim)
        self.mixer = nn.Linear(dim, dim)
        self.mlm_head = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        h = torch.relu(self.mixer(self.embeddings(ids)))
        return torch.log1p(torch.relu(self.mlm_head(h))).max(dim=1).values


class SparseCoSENTLoss(nn.Module):
    def __init__(self, model, scale=20.0, similarity_fct=cos_sim):
        super().__init__()
        self.model, self.scale, self.similarity_fct = model, scale, similarity_fct

    def forward(self, sentence1, sentence2, labels):
        scores = self.similarity_fct(self.model(sentence1), self.model(sentence2)) * self.scale
        scores = scores[:, None] - scores[None, :]
        mask = (labels[:, None] < labels[None, :]).float()
        scores = scores - (1 - mask) * 1e12
        scores = torch.cat((torch.zeros(1), scores.view(-1)), dim=0)
        return torch.logsumexp(scores, dim=0)


class SparseEncoderTrainer:
    def __init__(self, model, args, train_dataset, loss):
        self.model, self.args, self.train_dataset, self.loss = model, args, train_dataset, loss
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args["learning_rate"])
        total = args["num_train_epochs"] * (len(train_dataset) // args["per_device_train_batch_size"])
        warmup = int(args["warmup_ratio"] * total)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / max(1, warmup), max(0.0, (total - s) / max(1, total - warmup))))

    def compute_loss(self, inputs):
        return self.loss(inputs["sentence1"], inputs["sentence2"], inputs["label"])

    def train(self):
        data, bs, step = self.train_dataset, self.args["per_device_train_batch_size"], 0
        g = torch.Generator().manual_seed(self.args["seed"])
        self.model.train()
        for epoch in range(self.args["num_train_epochs"]):
            order = torch.randperm(len(data), generator=g)
            for start in range(0, len(order) - bs + 1, bs):
                idx = order[start:start + bs]
                loss = self.compute_loss({"sentence1": data.sentence1[idx], "sentence2": data.sentence2[idx],
                                          "label": data.label[idx]})
                loss.backward()
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % self.args["logging_steps"] == 0:
                    print({"loss": round(loss.item(), 4), "learning_rate": self.lr_scheduler.get_last_lr()[0],
                           "epoch": epoch})


def spearman(x, y):
    rx, ry = x.argsort().argsort().float(), y.argsort().argsort().float()
    return torch.corrcoef(torch.stack([rx, ry]))[0, 1].item()


@torch.no_grad()
def evaluate(model, data):
    model.eval()
    sims = pairwise_cos_sim(model(data.sentence1), model(data.sentence2))
    model.train()
    return {"eval_spearman_cosine": round(spearman(sims, data.label), 4)}


def main():
    torch.manual_seed(0)
    model = SpladeEncoder()
    loss = SparseCoSENTLoss(model, scale=20.0)
    args = {"learning_rate": 2e-3, "num_train_epochs": 4, "per_device_train_batch_size": 16, "warmup_ratio": 0.1,
            "logging_steps": 20, "seed": 0}
    SparseEncoderTrainer(model, args, ScoredPairs(1024, seed=1), loss).train()
    print(evaluate(model, ScoredPairs(400, seed=2)))


if __name__ == "__main__":
    main()
