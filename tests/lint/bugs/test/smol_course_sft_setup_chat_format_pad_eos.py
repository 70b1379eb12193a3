"""
Shape: course notebook turned script: AutoModelForCausalLM / AutoTokenizer for SmolLM2-135M moved to a cuda/mps/cpu device, tokenizer.pad_token and pad_token_id set to the EOS ones, trl.setup_chat_format(model, tokenizer), smoltalk loaded with load_dataset, SFTConfig with step-based eval and an SFTTrainer built with tokenizer= and no data_collator (so TRL's default language-modeling collator builds the labels), then a generate check before and after trainer.train().
Bug: the pad token is the EOS token (set by hand, and setup_chat_format makes pad <|im_end|>, which is also EOS), and the default collator turns every pad-id label into -100, so the real end-of-turn token is never trained and the fine-tuned model does not stop generating.
Thread: https://github.com/huggingface/smol-course/issues/159
"""
import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer, setup_chat_format

if torch.cuda.is_available():
    device = "cuda"
elif torch.backends.mps.is_available():
    device = "mps"
else:
    device = "cpu"

checkpoint = "HuggingFaceTB/SmolLM2-135M"
model = AutoModelForCausalLM.from_pretrained(pretrained_model_name_or_path=checkpoint).to(device)
tokenizer = AutoTokenizer.from_pretrained(pretrained_model_name_or_path=checkpoint)
tokenizer.pad_token, tokenizer.pad_token_id = tokenizer.eos_token, tokenizer.eos_token_id

model, tokenizer = setup_chat_format(model, tokenizer)

run_name = "SmolLM2-FT-everyday"


def sample(m, text, max_new_tokens=100):
    chat = [{"role": "user", "content": text}]
    prompt = tokenizer.apply_chat_template(chat, tokenize=False)
    enc = tokenizer(prompt, return_tensors="pt").to(device)
    out = m.generate(**enc, max_new_tokens=max_new_tokens)
    return tokenizer.decode(out[0], skip_special_tokens=True)


print("before:", sample(model, "Write a haiku about programming"))

data = load_dataset(path="HuggingFaceTB/smoltalk", name="everyday-conversations")

cfg = SFTConfig(
    output_dir="./sft_output",
    max_steps=1000,
    per_device_train_batch_size=4,
    learning_rate=5e-5,
    logging_steps=10,
    save_steps=100,
    evaluation_strategy="steps",
    eval_steps=50,
    use_mps_device=device == "mps",
    hub_model_id=run_name,
)

trainer = SFTTrainer(
    model=model,
    args=cfg,
    train_dataset=data["train"],
    tokenizer=tokenizer,
    eval_dataset=data["test"],
)

trainer.train()
trainer.save_model(f"./{run_name}")

print("after:", sample(trainer.model, "Write a haiku about programming"))
