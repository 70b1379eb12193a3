"""
Shape: pretraining data module adapted from Megatron-LM: a GPTDatasetConfig dataclass carrying the HF tokenizer and sequence options, a torch GPTDataset class over an mmap IndexedDataset whose __init__ reads pad_token_id from config.tokenizer (falling back to a constant) and caches masks, and whose __getitem__ builds tokens/labels either from an extra token or by torch.roll, fetches ltor masks and position ids from a helper, then masks padding in loss_mask and zeroes padded ids; a builder loads a Qwen-style AutoTokenizer and, like the package's pad helper, falls back to the EOS id when no pad id is set.
Bug: padding is found by comparing labels with the tokenizer's pad_token_id, which for Qwen-style tokenizers is the same id as the EOS token, so every real end-of-document target is dropped from the loss and the model never learns to emit EOS.
Thread: https://github.com/NVIDIA-NeMo/Automodel/issues/1336
"""
from dataclasses import dataclass
from typing import Optional

import numpy
import torch
from transformers import AutoTokenizer
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

FALLBACK_PAD = -100


@dataclass
class GPTDatasetConfig:
    random_seed: int
    sequence_length: int
    tokenizer: Optional[PreTrainedTokenizerBase] = None
    reset_position_ids: bool = False
    reset_attention_mask: bool = False
    eod_mask_loss: bool = False
    create_attention_mask: bool = True
    add_extra_token_to_sequence: bool = True


def ltor_masks_and_positions(data, eod_token, reset_pos, reset_attn, eod_mask_loss, make_attn):
    n = data.numel()
    attn = torch.tril(torch.ones((n, n), device=data.device)).unsqueeze(0) if make_attn else None
    loss_mask = torch.ones(n, dtype=torch.float, device=data.device)
    if eod_mask_loss:
        loss_mask[data == eod_token] = 0.0
    pos = torch.arange(n, dtype=torch.long, device=data.device)
    if attn is not None:
        attn = attn < 0.5
    return attn, loss_mask, pos


class GPTDataset(torch.utils.data.Dataset):
    def __init__(self, indexed_dataset, indexed_indices: numpy.ndarray, num_samples: Optional[int],
                 config: GPTDatasetConfig):
        self.dataset = indexed_dataset
        self.indices = indexed_indices
        self.num_samples = num_samples
        self.config = config
        self.cacheable = not any([config.reset_position_ids, config.reset_attention_mask, config.eod_mask_loss])
        self.cached = None
        try:
            self.pad_id = self.config.tokenizer.pad_token_id
        except Exception:
            self.pad_id = FALLBACK_PAD
        self.document_index, self.sample_index, self.shuffle_index = self._build_indices()

    def _build_indices(self):
        raise NotImplementedError

    def _sample_tokens(self, idx):
        raise NotImplementedError

    def __len__(self):
        total = self.sample_index.shape[0] - 1
        return total if self.num_samples is None else min(self.num_samples, total)

    def __getitem__(self, idx):
        text = torch.from_numpy(self._sample_tokens(0 if idx is None else idx)).long()
        if self.config.add_extra_token_to_sequence:
            tokens = text[:-1].contiguous()
            labels = text[1:].contiguous()
        else:
            tokens = text
            labels = torch.roll(text, shifts=-1, dims=0)
            labels[-1] = self.pad_id

        if self.cached is None:
            masks = ltor_masks_and_positions(tokens, -10000, self.config.reset_position_ids,
                                             self.config.reset_attention_mask, self.config.eod_mask_loss,
                                             self.config.create_attention_mask)
            if self.cacheable:
                self.cached = masks
        else:
            masks = self.cached
        attention_mask, loss_mask, _ = masks

        loss_mask[labels == self.pad_id] = 0.0
        tokens[tokens == self.pad_id] = 0
        labels[labels == self.pad_id] = 0

        if idx is None:
            loss_mask = torch.zeros_like(loss_mask)
        out = {"input_ids": tokens, "labels": labels, "loss_mask": loss_mask}
        if self.config.create_attention_mask:
            out["attention_mask"] = attention_mask
        return out


def build_pretrain_config(model_name: str, seq_len: int, seed: int = 1234) -> GPTDatasetConfig:
    tok = AutoTokenizer.from_pretrained(model_name)
    if tok.pad_token_id is None:
        tok.pad_token_id = tok.eos_token_id
    return GPTDatasetConfig(random_seed=seed, sequence_length=seq_len, tokenizer=tok)
