"""An EpochBasedTrainer in the style of ModelScope's: a cfg dict whose train.dataloader section
gives batch_size_per_gpu, workers_per_gpu and shuffle, a get_train_dataloader() that passes those
to _build_dataloader_with_dataset(dataset, batch_size_per_gpu, workers_per_gpu, dist, shuffle,
seed), a train_loop() over epochs that invokes hooks around train_step(model, batch), and hooks
that log the loss and evaluate at the end of each epoch. The fine-tuning file was assembled
source by source, so rows of the same kind (here the same label) sit next to each other.

_build_dataloader_with_dataset uses its shuffle argument only for the DistributedSampler; on a
single GPU (dist=False) it builds the DataLoader with sampler=None and no shuffle keyword, so the
loader keeps DataLoader's default shuffle=False even though the config says shuffle=True. Every
epoch walks the file in stored order: each stretch of batches holds one label, the loss falls and
rises at the same places every epoch, and the model ends each epoch tilted toward the last source.

Thread: https://github.com/modelscope/modelscope/issues/121
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SourceFileDataset(Dataset):
    """Sentence-classification rows concatenated source after source."""

    def __init__(self, num_sources=4, rows_per_source=256, dim=48, seed=0, sort_by_source=True):
        g = torch.Generator().manual_seed(seed)
        self.centers = torch.randn(num_sources, dim, generator=torch.Generator().manual_seed(123)) * 0.25
        feats, labels = [], []
        for src in range(num_sources):
            y = torch.full((rows_per_source,), src)
            x = self.centers[y] + torch.randn(rows_per_source, dim, generator=g)
            feats.append(x)
            labels.append(y)
        self.x = torch.cat(feats)
        self.y = torch.cat(labels)
        if not sort_by_source:
            perm = torch.randperm(len(self.y), generator=g)
            self.x, self.y = self.x[perm], self.y[perm]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"feature": self.x[i], "labels": self.y[i]}


class TextClassifier(nn.Module):
    def __init__(self, dim=48, hidden=64, num_labels=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, num_labels)

    def forward(self, feature, labels=None):
        logits = self.head(self.encoder(feature))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        return out


class Hook:
    def before_train_epoch(self, trainer):
        pass

    def after_train_iter(self, trainer):
        pass

    def after_train_epoch(self, trainer):
        pass


class TextLoggerHook(Hook):
    def __init__(self, interval=16):
        self.interval = interval

    def after_train_iter(self, trainer):
        if (trainer.inner_iter + 1) % self.interval == 0:
            print(f"epoch {trainer.epoch} iter {trainer.inner_iter + 1} loss {trainer.train_outputs['loss'].item():.4f}")


class EvaluationHook(Hook):
    def after_train_epoch(self, trainer):
        acc = trainer.evaluate()
        print(f"epoch {trainer.epoch} eval accuracy {acc:.3f}")


class EpochBasedTrainer:
    def __init__(self, model, cfg, train_dataset, eval_dataset, seed=42):
        self.model = model
        self.cfg = cfg
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self._seed = seed
        self._dist = False  # single-GPU fine-tuning
        self._hooks = [TextLoggerHook(), EvaluationHook()]
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg["train"]["optimizer"]["lr"])
        self._epoch = 0
        self._inner_iter = 0

    @property
    def epoch(self):
        return self._epoch

    @property
    def inner_iter(self):
        return self._inner_iter

    def data_collator(self, rows):
        return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}

    def _build_dataloader_with_dataset(self, dataset, batch_size_per_gpu, workers_per_gpu, dist=False,
                                       shuffle=True, seed=0, **kwargs):
        if dist:
            sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=shuffle, seed=seed)
        else:
            sampler = None
        return DataLoader(dataset, batch_size=batch_size_per_gpu, sampler=sampler,
                          num_workers=workers_per_gpu, collate_fn=self.data_collator, **kwargs)

    def get_train_dataloader(self):
        loader_cfg = dict(self.cfg["train"]["dataloader"])
        return self._build_dataloader_with_dataset(self.train_dataset, dist=self._dist, seed=self._seed,
                                                   **loader_cfg)

    def get_eval_dataloader(self):
        loader_cfg = dict(self.cfg["evaluation"]["dataloader"])
        return self._build_dataloader_with_dataset(self.eval_dataset, dist=self._dist, **loader_cfg)

    def invoke_hook(self, fn_name):
        for hook in self._hooks:
            getattr(hook, fn_name)(self)

    def train_step(self, model, inputs):
        model.train()
        outputs = model(**inputs)
        self.train_outputs = outputs
        self.optimizer.zero_grad()
        outputs["loss"].backward()
        self.optimizer.step()

    def train_loop(self, data_loader):
        for _ in range(self._epoch, self.cfg["train"]["max_epochs"]):
            self.invoke_hook("before_train_epoch")
            for i, data_batch in enumerate(data_loader):
                self._inner_iter = i
                self.train_step(self.model, data_batch)
                self.invoke_hook("after_train_iter")
            self.invoke_hook("after_train_epoch")
            self._epoch += 1

    def train(self):
        self.train_loop(self.get_train_dataloader())

    def evaluate(self):
        self.model.eval()
        correct = total = 0
        with torch.no_grad():
            for batch in self.get_eval_dataloader():
                pred = self.model(batch["feature"])["logits"].argmax(-1)
                correct += (pred == batch["labels"]).sum().item()
                total += len(pred)
        return correct / total


def main():
    torch.manual_seed(0)
    cfg = {
        "train": {
            "max_epochs": 3,
            "optimizer": {"lr": 1e-2},
            "dataloader": {"batch_size_per_gpu": 16, "workers_per_gpu": 0, "shuffle": True},
        },
        "evaluation": {"dataloader": {"batch_size_per_gpu": 128, "workers_per_gpu": 0, "shuffle": False}},
    }
    trainer = EpochBasedTrainer(TextClassifier(), cfg, SourceFileDataset(seed=0),
                                SourceFileDataset(rows_per_source=64, seed=1, sort_by_source=False))
    trainer.train()


if __name__ == "__main__":
    main()
