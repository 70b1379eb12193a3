"""
Shape: TRL distillation trainer: class GKDTrainer(SFTTrainer) with a teacher model, a GenerationConfig built from processing_class.pad_token_id, a staticmethod generate_on_policy_outputs(model, inputs, generation_config, pad_token_id) that builds new input_ids/attention_mask/labels from model.generate, a training_step override that swaps them in with probability lmbda, and compute_loss with a masked generalized JSD; plus the example script that loads the tokenizer with padding_side="left" and sets pad_token = eos_token when it has none.
Bug: the on-policy labels are masked with labels[labels == pad_token_id] = -100 while pad_token is the EOS token, so the EOS that ends every generated completion is dropped from the loss and the student never learns to stop.
Thread: https://github.com/huggingface/trl/pull/6357
"""
import random

import torch
import torch.nn.functional as F
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from trl import SFTTrainer
from trl.models.utils import unwrap_model_for_generation


class DistillTrainer(SFTTrainer):
    def __init__(self, model, teacher_model, args, train_dataset, processing_class, **kw):
        args.remove_unused_columns = False
        super().__init__(model, args=args, train_dataset=train_dataset, processing_class=processing_class, **kw)
        if isinstance(teacher_model, str):
            teacher_model = AutoModelForCausalLM.from_pretrained(teacher_model)
        self.teacher_model = self.accelerator.prepare_model(teacher_model, evaluation_mode=True)
        self.lmbda = args.lmbda
        self.beta = args.beta
        self.gen_kwargs = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, do_sample=True,
                               top_k=0, top_p=1.0, pad_token_id=self.processing_class.pad_token_id)
        self.generation_config = GenerationConfig(**self.gen_kwargs)
        if getattr(self.model.generation_config, "eos_token_id", None) is not None:
            self.generation_config.eos_token_id = self.model.generation_config.eos_token_id

    @staticmethod
    def jsd(student_logits, teacher_logits, labels, beta=0.5):
        s = F.log_softmax(student_logits, dim=-1)
        t = F.log_softmax(teacher_logits, dim=-1)
        b = torch.tensor(beta, dtype=s.dtype, device=s.device)
        mix = torch.logsumexp(torch.stack([s + torch.log1p(-b), t + torch.log(b)]), dim=0)
        div = b * F.kl_div(mix, t, reduction="none", log_target=True) \
            + (1 - b) * F.kl_div(mix, s, reduction="none", log_target=True)
        keep = labels != -100
        return div[keep].sum() / keep.sum().clamp_min(1)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        self.teacher_model.eval()
        with torch.no_grad():
            t_out = self.teacher_model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        loss = self.jsd(out.logits[:, :-1, :], t_out.logits[:, :-1, :], inputs["labels"][:, 1:], beta=self.beta)
        return (loss, out) if return_outputs else loss

    @staticmethod
    def generate_on_policy_outputs(model, inputs, generation_config, pad_token_id=None):
        gen = model.generate(input_ids=inputs["prompts"], attention_mask=inputs.get("prompt_attention_mask"),
                             generation_config=generation_config, return_dict_in_generate=True)
        seqs = gen.sequences
        attn = torch.ones_like(seqs)
        labels = seqs.clone()
        if pad_token_id is not None:
            labels[labels == pad_token_id] = -100
            attn[seqs == pad_token_id] = 0
        labels[:, :inputs["prompts"].shape[1]] = -100
        return seqs, attn, labels

    def training_step(self, model, inputs, num_items_in_batch=None):
        if random.random() <= self.lmbda:
            with unwrap_model_for_generation(model, self.accelerator) as gen_model:
                ids, attn, labels = self.generate_on_policy_outputs(
                    gen_model, inputs, self.generation_config, self.processing_class.pad_token_id)
            inputs["input_ids"], inputs["attention_mask"], inputs["labels"] = ids, attn, labels
        return super().training_step(model, inputs, num_items_in_batch)


def main(script_args, training_args, model_args):
    tok = AutoTokenizer.from_pretrained(model_args.model_name_or_path, padding_side="left")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    data = load_dataset(script_args.dataset_name)
    trainer = DistillTrainer(
        model=model_args.model_name_or_path,
        teacher_model=training_args.teacher_model_name_or_path,
        args=training_args,
        train_dataset=data[script_args.dataset_train_split],
        processing_class=tok,
    )
    trainer.train()
    trainer.save_model(training_args.output_dir)
