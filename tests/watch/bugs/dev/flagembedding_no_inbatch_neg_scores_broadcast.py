"""A query/passage bi-encoder fine-tuned the FlagEmbedding way: a BiEncoderModel with encode()
(mean pooling, L2 normalisation), compute_similarity(q_reps, p_reps) as a matmul against the
transposed passages, a temperature, and a CrossEntropyLoss; every query comes with a group of
train_group_size passages (its positive first, then hard negatives) and a small HF-style trainer
calls model(query, passage) for the loss. The run uses use_inbatch_neg=False, so each query
should only be scored against its own group: the model reshapes the passages to (B, G, D) and
calls compute_similarity, but the matmul of a (B, D) query matrix with the (B, D, G) transposed
groups broadcasts to (B, B, G) instead of giving (B, G); .view(B, -1) then flattens it to (B, B*G)
and the target 0 of every row points at query 0 against that row's positive. Every query but the
first is trained against the wrong passages. Nothing raises.

Thread: https://github.com/FlagOpen/FlagEmbedding/issues/450
"""
import torch
import torch.nn.functional as F
from torch import nn

TOPICS, WORDS, SEQ_Q, SEQ_P, VOCAB = 64, 12, 8, 16, 1 + 64 * 12


def topic_text(topic, length, g, noise=0.3):
    words = 1 + topic.unsqueeze(1) * WORDS + torch.randint(0, WORDS, (len(topic), length), generator=g)
    junk = torch.randint(1, VOCAB, (len(topic), length), generator=g)
    return torch.where(torch.rand(len(topic), length, generator=g) < noise, junk, words)


class TrainDatasetForEmbedding:
    def __init__(self, n, group_size, seed):
        g = torch.Generator().manual_seed(seed)
        self.topic = torch.randint(0, TOPICS, (n,), generator=g)
        self.query = topic_text(self.topic, SEQ_Q, g)
        self.pos = topic_text(self.topic, SEQ_P, g)
        near = (self.topic.unsqueeze(1) + torch.randint(1, TOPICS, (n, group_size - 1), generator=g)) % TOPICS
        self.neg = topic_text(near.flatten(), SEQ_P, g).view(n, group_size - 1, SEQ_P)

    def __len__(self):
        return len(self.topic)

    def batch(self, idx):
        passages = torch.cat([self.pos[idx].unsqueeze(1), self.neg[idx]], dim=1)
        return {"query": self.query[idx], "passage": passages.flatten(0, 1)}


class Encoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, dim, padding_idx=0)
        self.dense = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(0.1)

    def forward(self, ids):
        mask = (ids != 0).float().unsqueeze(-1)
        h = self.dropout(torch.tanh(self.dense(self.embeddings(ids))))
        return (h * mask).sum(1) / mask.sum(1).clamp_min(1.0)


class BiEncoderModel(nn.Module):
    def __init__(self, temperature=0.05, use_inbatch_neg=True):
        super().__init__()
        self.model = Encoder()
        self.temperature, self.use_inbatch_neg = temperature, use_inbatch_neg
        self.cross_entropy = nn.CrossEntropyLoss(reduction="mean")

    def encode(self, ids):
        return F.normalize(self.model(ids), dim=-1)

    def compute_similarity(self, q_reps, p_reps):
        if p_reps.dim() == 2:
            return torch.matmul(q_reps, p_reps.transpose(0, 1))
        return torch.matmul(q_reps, p_reps.transpose(-2, -1))

    def forward(self, query, passage):
        q_reps, p_reps = self.encode(query), self.encode(passage)
        group_size = p_reps.size(0) // q_reps.size(0)
        if self.use_inbatch_neg:
            scores = self.compute_similarity(q_reps, p_reps) / self.temperature
            scores = scores.view(q_reps.size(0), -1)
            target = torch.arange(scores.size(0), dtype=torch.long) * group_size
        else:
            scores = self.compute_similarity(q_reps, p_reps.view(q_reps.size(0), group_size, -1)) / self.temperature
            scores = scores.view(q_reps.size(0), -1)
            target = torch.zeros(scores.size(0), dtype=torch.long)
        return self.cross_entropy(scores, target)


class BiTrainer:
    def __init__(self, model, args, train_dataset):
        self.model, self.args, self.train_dataset = model, args, train_dataset
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args["learning_rate"], weight_decay=0.01)
        total = args["num_train_epochs"] * (len(train_dataset) // args["per_device_train_batch_size"])
        warmup = int(args["warmup_ratio"] * total)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / max(1, warmup), max(0.0, (total - s) / max(1, total - warmup))))

    def compute_loss(self, model, inputs):
        return model(**inputs)

    def train(self):
        g = torch.Generator().manual_seed(self.args["seed"])
        bs, step = self.args["per_device_train_batch_size"], 0
        self.model.train()
        for epoch in range(self.args["num_train_epochs"]):
            order = torch.randperm(len(self.train_dataset), generator=g)
            for start in range(0, len(order) - bs + 1, bs):
                loss = self.compute_loss(self.model, self.train_dataset.batch(order[start:start + bs]))
                loss.backward()
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % self.args["logging_steps"] == 0:
                    print({"loss": round(loss.item(), 4), "learning_rate": self.lr_scheduler.get_last_lr()[0],
                           "epoch": epoch})


@torch.no_grad()
def evaluate_recall(model, data):
    model.eval()
    q, p = model.encode(data.query), model.encode(data.pos)
    model.train()
    hit = data.topic[torch.matmul(q, p.T).argmax(1)] == data.topic
    return hit.float().mean().item()


def main():
    torch.manual_seed(0)
    train_dataset = TrainDatasetForEmbedding(1280, group_size=4, seed=1)
    model = BiEncoderModel(temperature=0.05, use_inbatch_neg=False)
    args = {"learning_rate": 3e-3, "num_train_epochs": 4, "per_device_train_batch_size": 16, "warmup_ratio": 0.1,
            "logging_steps": 20, "seed": 0}
    BiTrainer(model, args, train_dataset).train()
    print({"eval_topic_hit@1": evaluate_recall(model, TrainDatasetForEmbedding(400, group_size=4, seed=2))})


if __name__ == "__main__":
    main()
