"""
Shape: Accelerate example script: main() builds an FSDP2 plugin, a TorchDynamo plugin and AORecipeKwargs for fp8, AutoModelForCausalLM.from_config(...), torch AdamW, accelerator.prepare(model, optimizer); get_dataset(...) tokenizes TinyStories with datasets.map and packs it in a second map; a local collate_fn builds {"input_ids", "labels"} tensors; the loop calls model(**batch) and accelerator.backward(outputs.loss).
Bug: the packing map cuts seq_len + 1 tokens and stores chunk[:-1] as input_ids and chunk[1:] as labels, and the collator passes those as labels= to the causal LM, which shifts them again, so the loss targets the token two ahead.
Thread: https://github.com/huggingface/accelerate/pull/3637
"""
import argparse

import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from torchao.float8 import Float8LinearConfig
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from accelerate import Accelerator
from accelerate.utils import AORecipeKwargs, FullyShardedDataParallelPlugin, TorchDynamoPlugin, set_seed

CHECKPOINT = "NousResearch/Hermes-3-Llama-3.1-8B"


def get_dataset(accelerator, tokenizer, seq_len):
    raw = load_dataset("roneneldan/TinyStories", split="train[:50%]")

    def tokenize(examples):
        enc = tokenizer(examples["text"], padding=False, truncation=True, max_length=seq_len, return_tensors=None)
        enc["labels"] = enc["input_ids"].copy()
        return enc

    with accelerator.main_process_first():
        tokenized = raw.map(tokenize, batched=True, remove_columns=["text"])

    def pack(examples):
        stream = [tok for ids in examples["input_ids"] for tok in ids]
        window = seq_len + 1
        ids_out, labels_out = [], []
        for k in range(len(stream) // window):
            chunk = stream[k * window:(k + 1) * window]
            ids_out.append(chunk[:-1])
            labels_out.append(chunk[1:])
        return {"input_ids": ids_out, "labels": labels_out}

    with accelerator.main_process_first():
        packed = tokenized.map(pack, batched=True, remove_columns=tokenized.column_names, batch_size=1000)
    return packed.shuffle(seed=42)


def main():
    set_seed(42)
    p = argparse.ArgumentParser()
    p.add_argument("--sequence-length", type=int, default=8192)
    p.add_argument("--num-steps", type=int, default=1000)
    p.add_argument("--precision", type=str, default="fp8", choices=["fp8", "bf16"])
    args = p.parse_args()

    fsdp_plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        cpu_ram_efficient_loading=False,
        auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=["LlamaDecoderLayer"],
    )
    fsdp_plugin.set_mixed_precision(args.precision)
    compile_plugin = TorchDynamoPlugin(backend="inductor", use_regional_compilation=True)
    handlers = []
    if args.precision == "fp8":
        handlers = [AORecipeKwargs(config=Float8LinearConfig(enable_fsdp_float8_all_gather=True,
                                                             force_recompute_fp8_weight_in_bwd=True))]
    accelerator = Accelerator(fsdp_plugin=fsdp_plugin, dynamo_plugin=compile_plugin, kwargs_handlers=handlers)

    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(CHECKPOINT, use_cache=False),
                                             torch_dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model, optimizer = accelerator.prepare(model, optimizer)

    dataset = get_dataset(accelerator, tokenizer, args.sequence_length)

    def collate_fn(items):
        ids = torch.tensor([it["input_ids"] for it in items], dtype=torch.long)
        tgt = torch.tensor([it["labels"] for it in items], dtype=torch.long)
        return {"input_ids": ids, "labels": tgt}

    loader = accelerator.prepare(DataLoader(dataset, batch_size=1, collate_fn=collate_fn))
    model.train()
    n_steps = min(args.num_steps, len(loader))
    for step, batch in enumerate(loader):
        if step >= n_steps:
            break
        outputs = model(**batch)
        loss = outputs.loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.print(f"step {step}/{n_steps} loss {loss.item():.4f}")

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
