"""A sentence-embedding model trained on (anchor, positive, hard negative) triplets with a
MultipleNegativesRankingLoss(model, scale, gather_across_devices=True) under data parallelism
over 4 devices, emulated here in one process: each rank embeds its own shard, the loss builds
its candidates as cat(positives, negatives) of the local shard, all-gathers them with gradients
across ranks, and picks each anchor's label as rank * local_batch + i, which assumes the gathered
layout is all positives of all ranks followed by all negatives (PPPPNNNN). The gather actually
concatenates rank by rank (PNPNPNPN), so the label of rank 1's anchors lands on rank 0's hard
negatives, rank 2's on rank 1's positives and rank 3's on rank 1's negatives: three anchors in
four are trained to match some other row's text. The per-rank losses are averaged like DDP
gradients and an HF-style trainer steps AdamW with warmup. Nothing raises.

Thread: https://github.com/huggingface/sentence-transformers/pull/3453
"""
import torch
import torch.nn.functional as F
from torch import nn

TOPICS, WORDS, SEQ, VOCAB, WORLD_SIZE = 80, 10, 12, 1 + 80 * 10, 4


def sentences(topic, g, noise=0.3):
    ids = 1 + topic.unsqueeze(1) * WORDS + torch.randint(0, WORDS, (len(topic), SEQ), generator=g)
    junk = torch.randint(1, VOCAB, (len(topic), SEQ), generator=g)
    return torch.where(torch.rand(len(topic), SEQ, generator=g) < noise, junk, ids)


class TripletDataset:
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.topic = torch.randint(0, TOPICS, (n,), generator=g)
        self.anchor = sentences(self.topic, g)
        self.positive = sentences(self.topic, g)
        self.negative = sentences((self.topic + 1) % TOPICS, g)  # a close but wrong topic

    def __len__(self):
        return len(self.topic)


class SentenceTransformer(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, dim)
        self.dense = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(0.1)

    def forward(self, ids):
        return self.dense(self.dropout(self.word_embeddings(ids).mean(1)))


def cos_sim(a, b):
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


def all_gather_with_grad(per_rank_tensors):
    # torch.distributed.nn.all_gather: rank-ordered concatenation that keeps the autograd graph
    return torch.cat(per_rank_tensors, dim=0)


class MultipleNegativesRankingLoss(nn.Module):
    def __init__(self, model, scale=20.0, gather_across_devices=False):
        super().__init__()
        self.model, self.scale, self.gather_across_devices = model, scale, gather_across_devices
        self.cross_entropy_loss = nn.CrossEntropyLoss()

    def forward(self, rank, shards):
        """shards[r] = (anchor_ids, positive_ids, negative_ids) of rank r."""
        anchors = self.model(shards[rank][0])
        local_candidates = [torch.cat([self.model(s[1]), self.model(s[2])]) for s in shards]
        batch_size = anchors.size(0)
        offset = 0
        if self.gather_across_devices:
            candidates = all_gather_with_grad(local_candidates)
            offset = rank * batch_size
        else:
            candidates = local_candidates[rank]
        scores = cos_sim(anchors, candidates) * self.scale
        labels = torch.arange(offset, offset + batch_size)
        return self.cross_entropy_loss(scores, labels)


class SentenceTransformerTrainer:
    def __init__(self, model, args, train_dataset, loss):
        self.model, self.args, self.train_dataset, self.loss = model, args, train_dataset, loss
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args["learning_rate"])
        per_step = args["per_device_train_batch_size"] * WORLD_SIZE
        total = args["num_train_epochs"] * (len(train_dataset) // per_step)
        warmup = int(args["warmup_ratio"] * total)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / max(1, warmup), max(0.0, (total - s) / max(1, total - warmup))))

    def train(self):
        bs, data, step = self.args["per_device_train_batch_size"], self.train_dataset, 0
        g = torch.Generator().manual_seed(self.args["seed"])
        self.model.train()
        for epoch in range(self.args["num_train_epochs"]):
            order = torch.randperm(len(data), generator=g)
            for start in range(0, len(order) - bs * WORLD_SIZE + 1, bs * WORLD_SIZE):
                shards = []
                for r in range(WORLD_SIZE):
                    idx = order[start + r * bs:start + (r + 1) * bs]
                    shards.append((data.anchor[idx], data.positive[idx], data.negative[idx]))
                # every rank computes its loss; DDP averages the gradients over ranks
                loss = sum(self.loss(r, shards) for r in range(WORLD_SIZE)) / WORLD_SIZE
                loss.backward()
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % self.args["logging_steps"] == 0:
                    print({"loss": round(loss.item(), 4), "learning_rate": self.lr_scheduler.get_last_lr()[0],
                           "epoch": epoch})


@torch.no_grad()
def triplet_accuracy(model, data):
    model.eval()
    a, p, n = model(data.anchor), model(data.positive), model(data.negative)
    model.train()
    return (F.cosine_similarity(a, p) > F.cosine_similarity(a, n)).float().mean().item()


def main():
    torch.manual_seed(0)
    model = SentenceTransformer()
    loss = MultipleNegativesRankingLoss(model, scale=20.0, gather_across_devices=True)
    args = {"learning_rate": 2e-3, "num_train_epochs": 4, "per_device_train_batch_size": 8, "warmup_ratio": 0.1,
            "logging_steps": 10, "seed": 0}
    SentenceTransformerTrainer(model, args, TripletDataset(1024, seed=1), loss).train()
    print({"eval_cosine_accuracy": triplet_accuracy(model, TripletDataset(400, seed=2))})


if __name__ == "__main__":
    main()
