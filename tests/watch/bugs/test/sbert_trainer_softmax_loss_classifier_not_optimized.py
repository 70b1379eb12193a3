"""A sentence-embedding model (token embeddings, mean pooling, a dense layer) trained on
premise/hypothesis pairs with three NLI-style labels through a SoftmaxLoss(model, dim, num_labels)
module that owns its own classifier over (u, v, |u - v|). A Hugging Face-style EmbeddingTrainer
takes the model, the loss, the datasets and an evaluator; create_optimizer() builds AdamW (with the
usual no-decay group for biases and norms) over the named parameters of the model it was given,
and compute_loss() calls the loss module. The classifier lives in the loss, not in the model, so
its weights never enter the optimizer: they get a gradient at every step and keep their random
initial values, and the encoder is trained against a fixed random classifier. Nothing raises.

Thread: https://github.com/huggingface/sentence-transformers/issues/2872
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

TOPICS, WORDS_PER_TOPIC, SEQ = 20, 20, 12
VOCAB = 1 + TOPICS * WORDS_PER_TOPIC


class SentenceEncoder(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim, padding_idx=0)
        self.dense = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def get_sentence_embedding_dimension(self):
        return self.dense.out_features

    def forward(self, input_ids):
        mask = (input_ids != 0).float().unsqueeze(-1)
        pooled = (self.word_embeddings(input_ids) * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        return self.norm(torch.tanh(self.dense(pooled)))


class SoftmaxLoss(nn.Module):
    def __init__(self, model, sentence_embedding_dimension, num_labels):
        super().__init__()
        self.model = model
        self.classifier = nn.Linear(3 * sentence_embedding_dimension, num_labels)
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, premise_ids, hypothesis_ids, labels):
        u, v = self.model(premise_ids), self.model(hypothesis_ids)
        logits = self.classifier(torch.cat([u, v, (u - v).abs()], dim=1))
        return self.loss_fct(logits, labels)


class PairClassDataset(Dataset):
    """label 0: same topic, 1: neighbouring topic, 2: unrelated topic."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        topic = torch.randint(0, TOPICS, (n,), generator=g)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        far = (topic + torch.randint(3, TOPICS - 2, (n,), generator=g)) % TOPICS
        other = torch.where(self.labels == 0, topic, torch.where(self.labels == 1, (topic + 1) % TOPICS, far))
        self.premise = self._sentences(topic, g)
        self.hypothesis = self._sentences(other, g)

    @staticmethod
    def _sentences(topic, g):
        words = torch.randint(0, WORDS_PER_TOPIC, (len(topic), SEQ), generator=g)
        ids = 1 + topic.unsqueeze(1) * WORDS_PER_TOPIC + words
        lengths = torch.randint(6, SEQ + 1, (len(topic), 1), generator=g)
        return torch.where(torch.arange(SEQ).unsqueeze(0) < lengths, ids, torch.zeros_like(ids))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"premise": self.premise[i], "hypothesis": self.hypothesis[i], "label": self.labels[i]}


class TripletEvaluator:
    def __init__(self, anchors, positives, negatives, name):
        self.anchors, self.positives, self.negatives, self.name = anchors, positives, negatives, name

    @torch.no_grad()
    def __call__(self, model):
        model.eval()
        a, p, n = model(self.anchors), model(self.positives), model(self.negatives)
        model.train()
        acc = (F.cosine_similarity(a, p) > F.cosine_similarity(a, n)).float().mean().item()
        return {f"{self.name}_cosine_accuracy": acc}


class EmbeddingTrainer:
    def __init__(self, model, args, train_dataset, loss, evaluator=None):
        self.model, self.args, self.train_dataset = model, args, train_dataset
        self.loss, self.evaluator = loss, evaluator
        self.optimizer, self.lr_scheduler = None, None

    def create_optimizer(self):
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if name.endswith("bias") or "norm" in name else decay).append(param)
        groups = [{"params": decay, "weight_decay": self.args["weight_decay"]},
                  {"params": no_decay, "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=self.args["learning_rate"])
        return self.optimizer

    def create_scheduler(self, num_training_steps):
        warmup = int(self.args["warmup_ratio"] * num_training_steps)

        def lr_lambda(step):
            if step < warmup:
                return (step + 1) / max(1, warmup)
            return max(0.0, (num_training_steps - step) / max(1, num_training_steps - warmup))

        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda)

    def compute_loss(self, inputs):
        return self.loss(inputs["premise"], inputs["hypothesis"], inputs["label"])

    def train(self):
        loader = DataLoader(self.train_dataset, batch_size=self.args["per_device_train_batch_size"], shuffle=True,
                            generator=torch.Generator().manual_seed(self.args["seed"]))
        total = len(loader) * self.args["num_train_epochs"]
        self.create_optimizer()
        self.create_scheduler(total)
        self.model.train()
        step = 0
        for epoch in range(self.args["num_train_epochs"]):
            for inputs in loader:
                loss = self.compute_loss(inputs)
                loss.backward()
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % self.args["logging_steps"] == 0:
                    print({"loss": round(loss.item(), 4), "learning_rate": self.lr_scheduler.get_last_lr()[0],
                           "epoch": round(step / len(loader), 2)})
            if self.evaluator is not None:
                print({"epoch": epoch + 1, **self.evaluator(self.model)})


def main():
    torch.manual_seed(0)
    train_dataset = PairClassDataset(1600, seed=1)
    g = torch.Generator().manual_seed(2)
    topics = torch.randint(0, TOPICS, (300,), generator=g)
    far = (topics + torch.randint(3, TOPICS - 2, (300,), generator=g)) % TOPICS
    evaluator = TripletEvaluator(PairClassDataset._sentences(topics, g), PairClassDataset._sentences(topics, g),
                                 PairClassDataset._sentences(far, g), name="pair-dev")
    model = SentenceEncoder()
    softmax_loss = SoftmaxLoss(model, model.get_sentence_embedding_dimension(), num_labels=3)
    args = {"num_train_epochs": 3, "per_device_train_batch_size": 32, "learning_rate": 2e-3, "weight_decay": 0.01,
            "warmup_ratio": 0.1, "logging_steps": 10, "seed": 0}
    trainer = EmbeddingTrainer(model=model, args=args, train_dataset=train_dataset, loss=softmax_loss,
                               evaluator=evaluator)
    trainer.train()


if __name__ == "__main__":
    main()
