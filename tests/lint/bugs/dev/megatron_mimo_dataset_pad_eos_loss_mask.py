"""
Shape: multimodal LM data package: a @dataclass HF dataset provider whose _load_tokenizer() loads AutoTokenizer and sets pad_token = eos_token when none exists, caches it with object.__setattr__, and build_datasets(...) wraps each split in a torch Dataset class; its __getitem__ runs per-modality processors, tokenizes with placeholder tokens padded to seq_length, shifts labels by hand (the Megatron model does not shift) and builds a float loss_mask.
Bug: the loss mask zeroes every target equal to tokenizer.pad_token_id, which is the EOS id after pad_token = eos_token, so the real end-of-text token gets no loss and the model never learns to stop.
Thread: https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/4660
"""
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import torch
from datasets import load_dataset
from torch.utils.data import Dataset
from transformers import AutoImageProcessor, AutoTokenizer


class MultiEncoderTextDataset(Dataset):
    def __init__(self, rows, processors: Dict[str, Any], tokenizer, seq_length: int,
                 placeholder_ids: Dict[str, int], encoder_lengths: Dict[str, int],
                 modality_cols: Dict[str, str], text_col: str = "text"):
        if sum(encoder_lengths.values()) >= seq_length:
            raise ValueError("encoder tokens leave no room for text")
        self.rows = rows
        self.processors = processors
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.placeholder_ids = placeholder_ids
        self.encoder_lengths = encoder_lengths
        self.modality_cols = modality_cols
        self.text_col = text_col

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, idx):
        row = self.rows[idx]
        mod_inputs = {}
        for name, col in self.modality_cols.items():
            if row.get(col) is None:
                continue
            out = self.processors[name](row[col], return_tensors="pt")
            mod_inputs[name] = {k: v.squeeze(0) for k, v in out.items()}

        input_ids = self._encode(row.get(self.text_col, ""), mod_inputs)
        attention_mask = torch.ones_like(input_ids)
        position_ids = torch.arange(len(input_ids))

        labels = input_ids.clone()
        labels[:-1] = input_ids[1:]
        labels[-1] = -100

        pad_id = self.tokenizer.pad_token_id or 0
        loss_mask = torch.ones_like(input_ids, dtype=torch.float32)
        loss_mask[-1] = 0.0
        for ph in set(self.placeholder_ids.values()):
            loss_mask[labels == ph] = 0.0
        loss_mask[labels == pad_id] = 0.0
        labels[loss_mask == 0.0] = -100

        return {"input_ids": input_ids, "labels": labels, "loss_mask": loss_mask,
                "attention_mask": attention_mask, "position_ids": position_ids,
                "modality_inputs": mod_inputs}

    def _encode(self, text, mod_inputs):
        ids = self.tokenizer(text, truncation=True, max_length=self.seq_length,
                             return_tensors="pt")["input_ids"].squeeze(0)
        prefix = []
        for name in mod_inputs:
            if name in self.placeholder_ids:
                prefix += [self.placeholder_ids[name]] * self.encoder_lengths.get(name, 1)
        if prefix:
            ids = torch.cat([torch.tensor(prefix, dtype=ids.dtype), ids[:self.seq_length - len(prefix)]])
        if len(ids) < self.seq_length:
            fill = torch.full((self.seq_length - len(ids),), self.tokenizer.pad_token_id or 0, dtype=ids.dtype)
            ids = torch.cat([ids, fill])
        return ids[:self.seq_length]


@dataclass
class HFMultiEncoderProvider:
    seq_length: int
    hf_dataset_path: str
    hf_tokenizer_path: str = ""
    processor_paths: Dict[str, str] = field(default_factory=dict)
    placeholder_ids: Dict[str, int] = field(default_factory=dict)
    encoder_lengths: Dict[str, int] = field(default_factory=dict)
    modality_cols: Dict[str, str] = field(default_factory=dict)
    _tokenizer: Optional[Any] = field(default=None, repr=False)

    def _load_tokenizer(self):
        if self._tokenizer is not None:
            return self._tokenizer
        tok = AutoTokenizer.from_pretrained(self.hf_tokenizer_path)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        object.__setattr__(self, "_tokenizer", tok)
        return tok

    def build_datasets(self, n_train: int):
        tok = self._load_tokenizer()
        procs = {m: AutoImageProcessor.from_pretrained(p) for m, p in self.processor_paths.items()}
        rows = load_dataset(self.hf_dataset_path, split="train")
        rows = rows.select(range(min(n_train, len(rows))))
        return MultiEncoderTextDataset(rows, procs, tok, self.seq_length, self.placeholder_ids,
                                       self.encoder_lengths, self.modality_cols)
