"""
Shape: HF Trainer subclass for reward-model finetuning; __init__ builds TrainingArguments from an RLHF config (no optimizer given, so Trainer's default AdamW is used), loads AutoModelForSequenceClassification with torch_dtype float16 unless bf16, wraps it with peft LoRA, and calls super().__init__ with a pairwise collator and a compute_loss override.
Bug: the model is loaded in torch.float16 and trained by the Trainer's AdamW with the default adam_epsilon=1e-8, which underflows to zero in fp16, so parameters update to NaN.
Thread: https://github.com/CambioML/pykoi/pull/69
"""
import torch
from peft import get_peft_model
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

from pykoi.rlhf.config import RLHFConfig as RLHFSettings
from pykoi.rlhf.data import RewardDataCollatorWithPadding, build_ranking_datasets


class PairwiseRewardTrainer(Trainer):
    def __init__(self, rcfg: RLHFSettings) -> None:
        self._rcfg = rcfg
        c = rcfg
        self.args = TrainingArguments(
            c.output_dir,
            num_train_epochs=c.reward_epochs,
            learning_rate=c.learning_rate,
            weight_decay=c.weight_decay,
            per_device_train_batch_size=c.per_device_train_batch_size,
            per_device_eval_batch_size=c.per_device_eval_batch_size,
            gradient_accumulation_steps=c.gradient_accumulation_steps,
            gradient_checkpointing=c.gradient_checkpointing,
            evaluation_strategy=c.evaluation_strategy,
            save_strategy=c.evaluation_strategy,
            logging_strategy=c.logging_strategy,
            logging_steps=c.logging_steps,
            remove_unused_columns=c.remove_unused_columns,
            label_names=c.label_names,
            bf16=c.bf16,
        )
        self.load_dtype = torch.float16 if not rcfg.bf16 else torch.bfloat16

        self.tokenizer = AutoTokenizer.from_pretrained(rcfg.reward_model_path)
        self.tokenizer.pad_token = self.tokenizer.eos_token  # no pad token in the base LM

        self.backbone = AutoModelForSequenceClassification.from_pretrained(
            rcfg.reward_model_path, num_labels=1, torch_dtype=self.load_dtype,
            device_map=rcfg.device_map, load_in_8bit=rcfg.load_in_8bit)
        self.model = get_peft_model(self.backbone, rcfg.lora_config_reward)
        self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.model.config.use_cache = False if rcfg.gradient_checkpointing else True

        self.dataset = build_ranking_datasets(rcfg, self.tokenizer)
        super().__init__(
            model=self.model,
            args=self.args,
            data_collator=RewardDataCollatorWithPadding(
                tokenizer=self.tokenizer, max_length=rcfg.max_seq_length_reward),
            train_dataset=self.dataset.get("train"),
            eval_dataset=self.dataset.get("eval"),
            tokenizer=self.tokenizer,
        )

    def compute_loss(self, model, pair_inputs, return_outputs=False):
        r_chosen = model(input_ids=pair_inputs["input_ids_x"], attention_mask=pair_inputs["attention_mask_x"])[0]
        r_rejected = model(input_ids=pair_inputs["input_ids_y"], attention_mask=pair_inputs["attention_mask_y"])[0]
        margin = r_chosen - r_rejected
        loss = -torch.nn.functional.logsigmoid(margin).mean()
        if return_outputs:
            return loss, dict(rewards_chosen=r_chosen, rewards_rejected=r_rejected)
        return loss

    def fit_and_save(self, out_path=None):
        self.train()
        self.save_model(out_path or self._rcfg.output_dir)
