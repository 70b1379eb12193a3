"""An MMF-style multimodal transformer classifier: a pretrained text backend, a BERT pooler built
in build_heads() and a classifier Sequential(dropout, head transform, linear). A refactor moved the
pooler out of the classifier into its own attribute, while get_optimizer_parameters_for_bert still
builds the param groups from module.backend (at lr * finetune_lr_multiplier) and
module.classifier (at lr) only, so the freshly initialised pooler is in no param group and stays
at its random init. Trainer with _start_update (zero_grad) / _forward / _backward / _finish_update
(clip, step, scheduler step).

Thread: https://github.com/facebookresearch/mmf/pull/620
"""
import torch
import torch.nn.functional as F
from torch import nn

HIDDEN, VOCAB, SEQ, LABELS = 32, 40, 10, 3


def get_bert_configured_parameters(module, lr=None):
    named = list(module.named_parameters())
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
    groups = [{"params": [p for n, p in named if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in named if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    if lr is not None:
        for group in groups:
            group["lr"] = lr
    return groups


def get_optimizer_parameters_for_bert(module, config):
    if module.training_head_type == "pretraining":
        return get_bert_configured_parameters(module)
    lr = config["optimizer"]["lr"]
    finetune_lr_multiplier = config["model_config"].get("finetune_lr_multiplier", 1)
    encoder = module.backend
    parameters = get_bert_configured_parameters(encoder, lr * finetune_lr_multiplier)
    parameters += get_bert_configured_parameters(module.classifier, lr)
    return parameters


class MMFTransformer(nn.Module):
    training_head_type = "classification"

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)  # stands in for the pretrained backend checkpoint
        self.backend = nn.Sequential(nn.Embedding(VOCAB, HIDDEN),
                                     nn.TransformerEncoderLayer(HIDDEN, 4, 64, dropout=0.1, batch_first=True))
        self.build_heads()

    def build_heads(self):
        self.pooler = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh())
        transform = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.LayerNorm(HIDDEN))
        self.classifier = nn.Sequential(nn.Dropout(0.1), transform, nn.Linear(HIDDEN, LABELS))

    def get_optimizer_parameters(self, config):
        return get_optimizer_parameters_for_bert(self, config)

    def forward(self, sample_list):
        sequence_output = self.backend(sample_list["input_ids"])
        pooled_output = self.pooler(sequence_output[:, 0])
        scores = self.classifier(pooled_output)
        return {"scores": scores, "losses": {"ce": F.cross_entropy(scores, sample_list["targets"])}}


class MMFTrainer:
    def __init__(self, model, config):
        self.model, self.config = model, config
        self.optimizer = torch.optim.AdamW(model.get_optimizer_parameters(config), lr=config["optimizer"]["lr"])
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 10))

    def _start_update(self):
        self.optimizer.zero_grad()

    def _forward(self, batch):
        return sum(self.model(batch)["losses"].values())

    def _backward(self, loss):
        loss.backward()

    def _finish_update(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.25)
        self.optimizer.step()
        self.lr_scheduler.step()

    def training_loop(self, batches, max_updates):
        self.model.train()
        for num_updates in range(1, max_updates + 1):
            batch = batches[num_updates % len(batches)]
            self._start_update()
            loss = self._forward(batch)
            self._backward(loss)
            self._finish_update()
            if num_updates % 20 == 0:
                print(f"update {num_updates} loss {loss.item():.4f}")


def make_batches(n, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        targets = torch.randint(0, LABELS, (batch_size,), generator=g)
        ids = torch.randint(LABELS + 1, VOCAB, (batch_size, SEQ), generator=g)
        ids[:, 0] = LABELS  # [CLS]
        ids[torch.arange(batch_size), torch.randint(1, SEQ, (batch_size,), generator=g)] = targets
        batches.append({"input_ids": ids, "targets": targets})
    return batches


def main():
    config = {"optimizer": {"lr": 5e-4}, "model_config": {"finetune_lr_multiplier": 1}}
    model = MMFTransformer()
    pooler_before = model.pooler[0].weight.detach().clone()
    MMFTrainer(model, config).training_loop(make_batches(30, 16, seed=0), max_updates=100)
    print(f"pooler weight change: {(model.pooler[0].weight - pooler_before).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
