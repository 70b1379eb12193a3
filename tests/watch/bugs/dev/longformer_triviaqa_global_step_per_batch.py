"""A Lightning-style span-extraction QA module (TriviaQA-like: one document per batch, start and end
logits) trained with accumulate_grad_batches equal to the wanted batch size (8). The module builds a
LambdaLR with linear warmup and linear decay sized in optimizer steps
(steps = epochs * train_set_size / batch_size), and its optimizer_step override calls
self.scheduler.step(self.global_step). The trainer (as Lightning 0.6.0 did) increments global_step
on every batch, not on every optimizer step, so under accumulation the schedule runs 8 times too
fast: the warmup ends after about one update and the learning rate reaches zero an eighth of the way
into training, where it stays.

Thread: https://github.com/allenai/longformer/issues/37
"""
from argparse import Namespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

VOCAB, DOC_LEN, MARK = 50, 40, 1


class Trainer:
    def __init__(self, max_epochs, accumulate_grad_batches=1):
        self.max_epochs, self.accumulate_grad_batches = max_epochs, accumulate_grad_batches

    def fit(self, model):
        model.trainer, model.global_step = self, 0
        optimizer = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            model.train()
            for batch_idx, batch in enumerate(model.train_dataloader()):
                loss = model.training_step(batch, batch_idx)["loss"]
                (loss / self.accumulate_grad_batches).backward()
                if (batch_idx + 1) % self.accumulate_grad_batches == 0:
                    model.optimizer_step(epoch, batch_idx, optimizer, 0)
                    if (batch_idx + 1) % (8 * self.accumulate_grad_batches) == 0:
                        print(f"epoch {epoch} batch {batch_idx + 1} loss {loss.item():.4f} "
                              f"lr {optimizer.param_groups[0]['lr']:.2e}")
                model.global_step += 1
            print(f"epoch {epoch} val_em {model.validation_em():.3f}")


class TriviaQA(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.embed = nn.Embedding(VOCAB, 64)
        self.encoder = nn.GRU(64, 64, batch_first=True, bidirectional=True)
        self.qa_outputs = nn.Linear(128, 2)
        self.train_docs, self.val_docs = make_docs(args.train_set_size, 0), make_docs(100, 1)

    def forward(self, input_ids):
        start_logits, end_logits = self.qa_outputs(self.encoder(self.embed(input_ids))[0]).unbind(-1)
        return start_logits, end_logits

    def training_step(self, batch, batch_nb):
        input_ids, start, end = batch
        start_logits, end_logits = self(input_ids)
        return {"loss": (F.cross_entropy(start_logits, start) + F.cross_entropy(end_logits, end)) / 2}

    def optimizer_step(self, current_epoch, batch_idx, optimizer, optimizer_idx):
        optimizer.step()
        optimizer.zero_grad()
        self.scheduler.step(self.global_step)

    def configure_optimizers(self):
        def lr_lambda(current_step):
            if current_step < self.args.warmup:
                return current_step / max(1, self.args.warmup)
            return max(0.0, (self.args.steps - current_step) / max(1, self.args.steps - self.args.warmup))
        optimizer = torch.optim.Adam(self.parameters(), lr=self.args.lr)
        self.scheduler = LambdaLR(optimizer, lr_lambda)
        return optimizer

    def train_dataloader(self):
        order = torch.randperm(len(self.train_docs), generator=self.args.generator).tolist()
        return [self.train_docs[i] for i in order]  # batch_size=1: one document per batch

    @torch.no_grad()
    def validation_em(self):
        self.eval()
        hits = 0
        for input_ids, start, end in self.val_docs:
            s, e = self(input_ids)
            hits += int(s.argmax() == start and e.argmax() == end)
        self.train()
        return hits / len(self.val_docs)


def make_docs(n, seed):
    g = torch.Generator().manual_seed(seed)
    docs = []
    for _ in range(n):
        ids = torch.randint(2, VOCAB, (DOC_LEN,), generator=g)
        start = int(torch.randint(1, DOC_LEN - 6, (1,), generator=g))
        end = start + int(torch.randint(0, 4, (1,), generator=g))
        ids[start - 1], ids[end + 1] = MARK, MARK  # the answer span sits between two marker tokens
        docs.append((ids[None], torch.tensor([start]), torch.tensor([end])))
    return docs


def main():
    torch.manual_seed(0)
    args = Namespace(lr=3e-3, warmup=10, epochs=2, batch_size=8, train_set_size=320,
                     generator=torch.Generator().manual_seed(1))
    args.steps = args.epochs * args.train_set_size / args.batch_size
    trainer = Trainer(max_epochs=args.epochs, accumulate_grad_batches=args.batch_size)
    trainer.fit(TriviaQA(args))


if __name__ == "__main__":
    main()
