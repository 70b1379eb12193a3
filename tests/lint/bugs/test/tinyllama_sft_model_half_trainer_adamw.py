"""
Shape: qlora-style full fine-tuning script: dataclass argument groups (a TrainingArguments subclass of transformers.Seq2SeqTrainingArguments whose optim field defaults to 'adamw_torch'), get_accelerate_model(args, checkpoint_dir) loading AutoModelForCausalLM with a device_map plus the tokenizer, make_data_module(...) building datasets and a collator, and train() that wires everything into a Seq2SeqTrainer and calls trainer.train() / evaluate().
Bug: to fit on 24 GB cards the user added model = model.half() right after from_pretrained, so the Trainer's AdamW updates pure fp16 weights; training loss drops to 0 after one batch and eval loss is nan.
Thread: https://github.com/jzhang38/TinyLlama/issues/32
"""
import argparse
import os
from dataclasses import dataclass, field
from typing import Optional

import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, Seq2SeqTrainer, set_seed

from data_utils import make_data_module, smart_tokenizer_and_embedding_resize

DEFAULT_PAD_TOKEN = "[PAD]"


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default="PY007/TinyLlama-1.1B-intermediate-step-240k-503b")
    trust_remote_code: Optional[bool] = field(default=False)


@dataclass
class DataArguments:
    dataset: str = field(default="oasst1")
    dataset_format: Optional[str] = field(default=None)
    source_max_len: int = field(default=1024)
    target_max_len: int = field(default=256)


@dataclass
class TrainingArguments(transformers.Seq2SeqTrainingArguments):
    train_on_source: Optional[bool] = field(default=False)
    report_to: str = field(default="none")
    output_dir: str = field(default="./output")
    optim: str = field(default="adamw_torch")
    per_device_train_batch_size: int = field(default=16)
    gradient_accumulation_steps: int = field(default=1)
    max_steps: int = field(default=10000)
    weight_decay: float = field(default=0.0)
    learning_rate: float = field(default=0.0002)
    remove_unused_columns: bool = field(default=False)
    max_grad_norm: float = field(default=0.3)
    gradient_checkpointing: bool = field(default=True)
    lr_scheduler_type: str = field(default="constant")
    warmup_ratio: float = field(default=0.03)


def get_accelerate_model(args, checkpoint_dir):
    device_map = "auto"
    if os.environ.get("LOCAL_RANK") is not None:
        device_map = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    model = AutoModelForCausalLM.from_pretrained(
        args.model_name_or_path,
        device_map=device_map,
        trust_remote_code=args.trust_remote_code,
    )
    model = model.half()
    tokenizer = AutoTokenizer.from_pretrained(
        args.model_name_or_path, padding_side="right", use_fast=True, trust_remote_code=args.trust_remote_code)
    if tokenizer._pad_token is None:
        smart_tokenizer_and_embedding_resize(special_tokens_dict=dict(pad_token=DEFAULT_PAD_TOKEN), tokenizer=tokenizer, model=model)
    return model, tokenizer


def train():
    hfparser = transformers.HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    model_args, data_args, training_args, extra = hfparser.parse_args_into_dataclasses(return_remaining_strings=True)
    args = argparse.Namespace(**vars(model_args), **vars(data_args), **vars(training_args))
    model, tokenizer = get_accelerate_model(args, None)
    model.config.use_cache = False
    set_seed(args.seed)
    data_module = make_data_module(tokenizer=tokenizer, args=args)
    trainer = Seq2SeqTrainer(
        model=model,
        tokenizer=tokenizer,
        args=training_args,
        **{k: v for k, v in data_module.items() if k != "predict_dataset"},
    )
    if args.do_train:
        result = trainer.train()
        trainer.log_metrics("train", result.metrics)
        trainer.save_state()
    if args.do_eval:
        trainer.log_metrics("eval", trainer.evaluate(metric_key_prefix="eval"))


if __name__ == "__main__":
    train()
