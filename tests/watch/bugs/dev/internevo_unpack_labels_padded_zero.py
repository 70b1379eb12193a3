"""An InternEvo-style pretraining step on packed data: a packed dataset yields micro-batches whose
input_ids are several documents concatenated into one row, with cu_seqlens marking the document
boundaries and the labels already shifted (-100 on each document's last position). When the
attention path cannot take packed sequences, the scheduler's _load_accum_batch() passes both the
input_ids and the labels through data_process_func = unpack_data(x, cu_seqlens), which cuts the row
into one row per document and pads each to seq_len with 0. The model then runs on the padded batch
and the loss is a cross-entropy with ignore_index=-100, divided by the number of micro-batches for
gradient accumulation before backward; the optimizer steps once per batch. unpack_data pads the
labels with 0 as well, and 0 is a real token id (<unk>) rather than -100, so every padding slot
becomes a target "predict token 0": the model learns to emit 0 after its inputs run out, and the
reported loss is diluted by easy padding targets.

Thread: https://github.com/InternLM/InternEvo/pull/154
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB = 40
SEQ_LEN = 48          # gpc.config.data.seq_len
PACKED_LEN = 96       # micro_bsz * seq_len worth of tokens per packed row
MICRO_BSZ = 2


class PackedDataset(Dataset):
    """Each item packs documents (lengths 6-40) into one row of PACKED_LEN tokens."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            ids, labels, cu = [], [], [0]
            while True:
                length = int(torch.randint(6, 41, (1,), generator=g))
                if cu[-1] + length > PACKED_LEN or len(cu) > MICRO_BSZ:
                    break
                start = int(torch.randint(3, VOCAB, (1,), generator=g))
                step = int(torch.randint(1, 4, (1,), generator=g))
                doc = [3 + (start - 3 + step * i) % (VOCAB - 3) for i in range(length)]
                ids += doc
                labels += doc[1:] + [-100]
                cu.append(cu[-1] + length)
            pad = PACKED_LEN - len(ids)
            self.items.append((torch.tensor(ids + [0] * pad), torch.tensor(labels + [-100] * pad),
                               torch.tensor(cu)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def packed_collate_fn(batch):
    ids, labels, cu = zip(*batch)
    return {"input_ids": torch.stack(ids), "cu_seqlens": list(cu)}, torch.stack(labels)


def unpack_data(input_ids, cu_seqlens, is_type_ids: bool = False):
    """(1, packed_len) + cu_seqlens -> (num_docs, seq_len), padded with zeros."""
    bsz = input_ids.shape[0]
    num_sequence = MICRO_BSZ
    outputs = torch.zeros(bsz, num_sequence, SEQ_LEN, dtype=input_ids.dtype)
    for i in range(bsz):
        cu = cu_seqlens[i]
        for j in range(len(cu) - 1):
            seq_length = int(cu[j + 1] - cu[j])
            outputs[i, j, :seq_length] = input_ids[i, cu[j]:cu[j + 1]]
    return outputs.view(bsz * num_sequence, SEQ_LEN)


class TinyInternLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, dim)
        self.layer = nn.GRU(dim, dim, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, VOCAB, bias=False)

    def forward(self, input_ids):
        h, _ = self.layer(self.tok_embeddings(input_ids))
        return self.output(self.norm(h))


class FlashGPTLMLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss_fn = nn.CrossEntropyLoss(reduction="mean", ignore_index=-100)

    def forward(self, logits, labels):
        return self.loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


class NonPipelineScheduler:
    def __init__(self, num_microbatches, data_process_func=None):
        self.num_microbatches = num_microbatches
        self.data_process_func = data_process_func

    def _load_accum_batch(self, data, label):
        _data = dict(data)
        _label = label
        if self.data_process_func:
            _data["input_ids"] = self.data_process_func(_data["input_ids"], _data["cu_seqlens"])
            _label = self.data_process_func(_label, _data["cu_seqlens"])
        _data.pop("cu_seqlens")
        return _data, _label

    def forward_backward_step(self, model, criterion, batches):
        total = 0.0
        for data, label in batches:
            data, label = self._load_accum_batch(data, label)
            output = model(**data)
            loss = criterion(output, label) / self.num_microbatches
            loss.backward()
            total += loss.item()
        return total


def main():
    torch.manual_seed(0)
    accumulate = 2
    loader = DataLoader(PackedDataset(400), batch_size=1, shuffle=True, collate_fn=packed_collate_fn,
                        generator=torch.Generator().manual_seed(0))
    model = TinyInternLM()
    criterion = FlashGPTLMLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
    scheduler = NonPipelineScheduler(num_microbatches=accumulate, data_process_func=unpack_data)
    train_iter = iter(loader)
    for train_state_step in range(100):
        batches = [next(train_iter) for _ in range(accumulate)]
        optimizer.zero_grad()
        loss = scheduler.forward_backward_step(model, criterion, batches)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        lr_scheduler.step()
        if train_state_step % 20 == 0:
            print(f"step={train_state_step} loss={loss:.4f} lr={lr_scheduler.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
