"""A BERT span-extraction QA fine-tuning example written as a trial class for a platform harness:
BertSQuADPyTorch(context) wraps the model, AdamW with decay / no-decay groups and
get_linear_schedule_with_warmup(num_warmup_steps, num_training_steps) stepped every batch;
build_training_data_loader / build_validation_data_loader, train_batch() calling
context.backward() and context.step_optimizer(), evaluate_full_dataset() computing exact match.
The harness runs searcher max_steps "steps" of batches_per_step batches each. The experiment config
sets num_training_steps far below the number of batches the searcher will run (the fix sets it to
max_steps * batches_per_step), so the linear decay takes the learning rate to zero early in the run
and every later batch updates nothing.

Thread: https://github.com/determined-ai/determined/pull/711
"""
import enum

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ, Q_LEN, CLS, SEP, END, ANSWER_MARK = 60, 20, 4, 1, 2, 3, 4

CONFIG = {
    "hyperparameters": {"global_batch_size": 12, "learning_rate": 2e-3, "adam_epsilon": 1e-8,
                        "weight_decay": 0.0, "num_warmup_steps": 0, "num_training_steps": 40,
                        "max_seq_length": SEQ},
    "searcher": {"max_steps": 40},
    "batches_per_step": 10,
    "min_validation_period": 10,
}


class StepMode(enum.Enum):
    STEP_EVERY_EPOCH = 0
    STEP_EVERY_BATCH = 1


class TrialContext:
    def __init__(self, config):
        self.config, self._schedulers = config, []

    def get_hparam(self, name):
        return self.config["hyperparameters"][name]

    def get_per_slot_batch_size(self):
        return self.get_hparam("global_batch_size")

    def wrap_model(self, model):
        return model

    def wrap_optimizer(self, optimizer):
        return optimizer

    def wrap_lrscheduler(self, scheduler, step_mode):
        self._schedulers.append((scheduler, step_mode))
        return scheduler

    def backward(self, loss):
        loss.backward()

    def step_optimizer(self, optimizer, clip_grads=None):
        if clip_grads is not None:
            clip_grads([p for g in optimizer.param_groups for p in g["params"]])
        optimizer.step()
        optimizer.zero_grad()
        for scheduler, mode in self._schedulers:
            if mode is StepMode.STEP_EVERY_BATCH:
                scheduler.step()


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return step / max(1, num_warmup_steps)
        return max(0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps))
    return LambdaLR(optimizer, lr_lambda)


class BertForQuestionAnswering(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, dim)
        self.position_embeddings = nn.Embedding(SEQ, dim)
        self.token_type_embeddings = nn.Embedding(2, dim)
        self.LayerNorm = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.qa_outputs = nn.Linear(dim, 2)

    def forward(self, input_ids, attention_mask, token_type_ids, start_positions=None, end_positions=None):
        pos = torch.arange(input_ids.size(1))
        h = self.word_embeddings(input_ids) + self.position_embeddings(pos) + self.token_type_embeddings(token_type_ids)
        h = self.encoder(self.LayerNorm(h), src_key_padding_mask=attention_mask == 0)
        start_logits, end_logits = self.qa_outputs(h).unbind(-1)
        if start_positions is None:
            return start_logits, end_logits
        ignored = start_logits.size(1)
        loss = (F.cross_entropy(start_logits, start_positions.clamp(0, ignored), ignore_index=ignored)
                + F.cross_entropy(end_logits, end_positions.clamp(0, ignored), ignore_index=ignored)) / 2
        return loss, start_logits, end_logits


def load_and_cache_examples(n, seed):
    """[CLS] question [SEP] context [SEP]: the answer starts right after the context's single
    ANSWER_MARK token and ends just before the END marker that follows it."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, VOCAB, (n, SEQ), generator=g)
    ids[:, 0], ids[:, Q_LEN + 1], ids[:, -1] = CLS, SEP, SEP
    types = torch.zeros(n, SEQ, dtype=torch.long)
    types[:, Q_LEN + 2:] = 1
    ctx0 = Q_LEN + 2
    anchors = ctx0 + torch.randint(0, SEQ - ctx0 - 5, (n,), generator=g)
    spans = 1 + torch.randint(0, 3, (n,), generator=g)
    rows = torch.arange(n)
    ids[rows, anchors] = ANSWER_MARK
    ids[rows, anchors + 1 + spans] = END
    return TensorDataset(ids, torch.ones(n, SEQ, dtype=torch.long), types, anchors + 1, anchors + spans)


class BertSQuADPyTorch:
    def __init__(self, context):
        self.context = context
        self.model = self.context.wrap_model(BertForQuestionAnswering())
        no_decay = ["bias", "LayerNorm.weight"]
        optimizer_grouped_parameters = [
            {"params": [p for n, p in self.model.named_parameters() if not any(nd in n for nd in no_decay)],
             "weight_decay": self.context.get_hparam("weight_decay")},
            {"params": [p for n, p in self.model.named_parameters() if any(nd in n for nd in no_decay)],
             "weight_decay": 0.0},
        ]
        self.optimizer = self.context.wrap_optimizer(torch.optim.AdamW(
            optimizer_grouped_parameters, lr=self.context.get_hparam("learning_rate"),
            eps=self.context.get_hparam("adam_epsilon")))
        self.lr_scheduler = self.context.wrap_lrscheduler(
            get_linear_schedule_with_warmup(
                self.optimizer,
                num_warmup_steps=self.context.get_hparam("num_warmup_steps"),
                num_training_steps=self.context.get_hparam("num_training_steps")),
            StepMode.STEP_EVERY_BATCH)

    def build_training_data_loader(self):
        return DataLoader(load_and_cache_examples(1200, seed=0),
                          batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

    def build_validation_data_loader(self):
        return DataLoader(load_and_cache_examples(240, seed=1), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch, epoch_idx, batch_idx):
        inputs = {"input_ids": batch[0], "attention_mask": batch[1], "token_type_ids": batch[2],
                  "start_positions": batch[3], "end_positions": batch[4]}
        loss = self.model(**inputs)[0]
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_full_dataset(self, data_loader):
        exact = total = 0
        with torch.no_grad():
            for batch in data_loader:
                start_logits, end_logits = self.model(batch[0], batch[1], batch[2])
                exact += int(((start_logits.argmax(1) == batch[3]) & (end_logits.argmax(1) == batch[4])).sum())
                total += len(batch[0])
        return {"exact_match": exact / total}


def run_trial(trial_cls, config):
    torch.manual_seed(0)
    trial = trial_cls(TrialContext(config))
    train_loader, val_loader = trial.build_training_data_loader(), trial.build_validation_data_loader()
    batches, epoch_idx, batch_idx = iter(train_loader), 0, 0
    for step in range(1, config["searcher"]["max_steps"] + 1):
        trial.model.train()
        losses = []
        for _ in range(config["batches_per_step"]):
            try:
                batch = next(batches)
            except StopIteration:
                epoch_idx, batches = epoch_idx + 1, iter(train_loader)
                batch = next(batches)
            losses.append(trial.train_batch(batch, epoch_idx, batch_idx)["loss"].item())
            batch_idx += 1
        print(f"step {step} loss {sum(losses) / len(losses):.4f} lr {trial.optimizer.param_groups[0]['lr']:.2e}")
        if step % config["min_validation_period"] == 0:
            trial.model.eval()
            print(f"  validation {trial.evaluate_full_dataset(val_loader)}")


if __name__ == "__main__":
    run_trial(BertSQuADPyTorch, CONFIG)
