"""
Shape: knowledge-distillation trainer `DistillLogitsTrainer(trl.SFTTrainer)` that pops temperature/alpha/loss_type from its kwargs, overrides compute_loss(model, inputs, return_outputs, num_items_in_batch) to run the student, take teacher logits from the batch or from a teacher model under torch.no_grad(), align sequence lengths and return a combined distillation loss from a helper in a losses module; a driver builds an SFTConfig with gradient_accumulation_steps from the run config and calls trainer.train().
Bug: compute_loss ignores num_items_in_batch and returns each micro-batch's mean loss without dividing by the number of accumulation steps, so the accumulated gradient and the logged loss grow with gradient_accumulation_steps.
Thread: https://github.com/agokrani/distillKitPlus/issues/5
"""
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from trl import SFTConfig, SFTTrainer

from components.loss import compute_distillation_loss


class DistillLogitsTrainer(SFTTrainer):
    def __init__(self, *args, **kwargs):
        self.temperature = kwargs.pop("temperature", 2.0)
        self.alpha = kwargs.pop("alpha", 0.1)
        self.loss_type = kwargs.pop("loss_type", "fkl")
        self.teacher_model = kwargs.pop("teacher_model", None)
        super().__init__(*args, **kwargs)

    def compute_loss(self, model: PreTrainedModel, inputs: Dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Optional[int] = None) -> Union[Tensor, Tuple[Tensor, Any]]:
        inputs = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in inputs.items()}
        teacher_logits = inputs.pop("logits") if "logits" in inputs else None
        student = model.module if hasattr(model, "module") else model
        student_out = student(**inputs)

        if teacher_logits is None:
            teacher_logits = self._teacher_logits(inputs)
        teacher_logits = self._match_length(teacher_logits, student_out.logits)

        loss = compute_distillation_loss(
            student_out.logits,
            teacher_logits,
            student_out.loss,
            loss_type=self.loss_type,
            alpha=self.alpha,
            temperature=self.temperature,
            labels=inputs["labels"] if self.loss_type == "uld" else None,
        )
        return (loss, student_out) if return_outputs else loss

    def _teacher_logits(self, inputs: Dict[str, Any]) -> Tensor:
        if self.teacher_model is None:
            raise ValueError("a teacher model is needed when the batch carries no logits")
        self.teacher_model = self.teacher_model.to(self.model.device)
        teacher = self.teacher_model.module if hasattr(self.teacher_model, "module") else self.teacher_model
        with torch.no_grad():
            return teacher(**inputs).logits

    @staticmethod
    def _match_length(teacher_logits: Tensor, student_logits: Tensor) -> Tensor:
        if teacher_logits.size(1) > student_logits.size(1):
            return teacher_logits[:, :student_logits.size(1), :]
        if teacher_logits.size(1) < student_logits.size(1):
            raise ValueError("teacher sequence is shorter than the student sequence")
        return teacher_logits


def run_distillation(cfg, train_dataset, eval_dataset=None):
    tokenizer = AutoTokenizer.from_pretrained(cfg["student"])
    student = AutoModelForCausalLM.from_pretrained(cfg["student"], torch_dtype=torch.bfloat16)
    teacher = None
    if not cfg.get("precomputed_logits", True):
        teacher = AutoModelForCausalLM.from_pretrained(cfg["teacher"], torch_dtype=torch.bfloat16)

    args = SFTConfig(
        output_dir=cfg["output_dir"],
        per_device_train_batch_size=cfg["batch_size"],
        gradient_accumulation_steps=cfg["gradient_accumulation_steps"],
        learning_rate=cfg["learning_rate"],
        num_train_epochs=cfg["epochs"],
        bf16=True,
        logging_steps=10,
    )
    trainer = DistillLogitsTrainer(
        model=student,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        teacher_model=teacher,
        temperature=cfg.get("temperature", 2.0),
        alpha=cfg.get("alpha", 0.1),
        loss_type=cfg.get("loss_type", "fkl"),
    )
    trainer.train()
    return trainer
