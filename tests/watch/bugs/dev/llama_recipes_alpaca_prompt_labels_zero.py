"""A llama-recipes style fine-tune on an Alpaca-format dataset: InstructionDataset.__getitem__
tokenizes the prompt and prompt+output (+eos), pads the example to max_words with -1, copies it to
labels, marks the prompt part of labels with -1, builds masks with .ge(0) and then writes 0 into
every masked position of both the example and the labels. The model is a LlamaForCausalLM-like
module whose loss is a shifted cross-entropy with the default ignore_index=-100; train(model,
train_dataloader, eval_dataloader, tokenizer, optimizer, lr_scheduler, gradient_accumulation_steps,
train_config) divides the loss by gradient_accumulation_steps, steps every N batches, and a StepLR
decays the lr each epoch. The prompt and padding positions end up labelled 0, which is a real token
id (<unk>) rather than -100, so the model is trained to predict token 0 at every prompt position
and after every answer: most targets are 0, the loss falls fast, and generations fill with <unk>.

Thread: https://github.com/meta-llama/llama-cookbook/issues/101
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

UNK, BOS, EOS = 0, 1, 2
VOCAB = 40
PROMPT_TEMPLATE = [3, 4, 5, 6]          # "Below is an instruction ... ### Instruction:"
RESPONSE_MARK = [7, 8]                  # "### Response:"


class ToyLlamaTokenizer:
    bos_token_id, eos_token_id, unk_token_id = BOS, EOS, UNK

    def encode(self, ids):
        return [BOS] + list(ids)


def make_alpaca_records(n, seed=0):
    """Instruction: a few word ids; output: the instruction words mapped by a fixed table, reversed."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randperm(VOCAB - 10, generator=torch.Generator().manual_seed(3)) + 10
    records = []
    for _ in range(n):
        k = int(torch.randint(3, 8, (1,), generator=g))
        instruction = torch.randint(10, VOCAB, (k,), generator=g)
        records.append({"instruction": instruction.tolist(), "output": table[instruction.flip(0) - 10].tolist()})
    return records


class InstructionDataset(Dataset):
    def __init__(self, records, tokenizer, max_words=32):
        self.ann, self.tokenizer, self.max_words = records, tokenizer, max_words

    def __len__(self):
        return len(self.ann)

    def __getitem__(self, index):
        ann = self.ann[index]
        prompt = PROMPT_TEMPLATE + ann["instruction"] + RESPONSE_MARK
        example = prompt + ann["output"]
        prompt = torch.tensor(self.tokenizer.encode(prompt), dtype=torch.int64)
        example = self.tokenizer.encode(example)
        example.append(self.tokenizer.eos_token_id)
        example = torch.tensor(example, dtype=torch.int64)
        padding = self.max_words - example.shape[0]
        if padding > 0:
            example = torch.cat((example, torch.zeros(padding, dtype=torch.int64) - 1))
        elif padding < 0:
            example = example[: self.max_words]
        labels = copy.deepcopy(example)
        labels[: len(prompt)] = -1
        example_mask = example.ge(0)
        label_mask = labels.ge(0)
        example[~example_mask] = 0
        labels[~label_mask] = 0
        return {"input_ids": example, "labels": labels, "attention_mask": example_mask.long()}


class TinyLlamaForCausalLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB, bias=False)

    def forward(self, input_ids, attention_mask=None, labels=None):
        h, _ = self.rnn(self.embed_tokens(input_ids))
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss = nn.CrossEntropyLoss()(shift_logits.view(-1, VOCAB), shift_labels.view(-1))
        return type("Out", (), {"loss": loss, "logits": logits})()


def evaluation(model, eval_dataloader):
    model.eval()
    eval_loss = 0.0
    with torch.no_grad():
        for batch in eval_dataloader:
            eval_loss += model(**batch).loss.item()
    model.train()
    return eval_loss / len(eval_dataloader)


def train(model, train_dataloader, eval_dataloader, tokenizer, optimizer, lr_scheduler,
          gradient_accumulation_steps, train_config):
    for epoch in range(train_config["num_epochs"]):
        model.train()
        total_loss = 0.0
        for step, batch in enumerate(train_dataloader):
            loss = model(**batch).loss
            loss = loss / gradient_accumulation_steps
            total_loss += loss.detach().float()
            loss.backward()
            if (step + 1) % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                optimizer.zero_grad()
            if step % 20 == 0:
                print(f"Training Epoch: {epoch}, step {step}/{len(train_dataloader)} completed (loss: {loss.item():.4f})")
        lr_scheduler.step()
        train_epoch_loss = total_loss / len(train_dataloader)
        eval_loss = evaluation(model, eval_dataloader)
        print(f"Epoch {epoch}: train_perplexity={torch.exp(train_epoch_loss):.4f}, "
              f"train_epoch_loss={train_epoch_loss:.4f}, eval_loss={eval_loss:.4f}")


def main():
    torch.manual_seed(0)
    train_config = {"num_epochs": 2, "batch_size_training": 4, "lr": 3e-3, "gamma": 0.85,
                    "gradient_accumulation_steps": 1}
    tokenizer = ToyLlamaTokenizer()
    dataset_train = InstructionDataset(make_alpaca_records(288, seed=0), tokenizer)
    dataset_val = InstructionDataset(make_alpaca_records(32, seed=1), tokenizer)
    train_dataloader = DataLoader(dataset_train, batch_size=train_config["batch_size_training"], shuffle=True,
                                  drop_last=True, generator=torch.Generator().manual_seed(0))
    eval_dataloader = DataLoader(dataset_val, batch_size=train_config["batch_size_training"])
    model = TinyLlamaForCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_config["lr"], weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=train_config["gamma"])
    train(model, train_dataloader, eval_dataloader, tokenizer, optimizer, scheduler,
          train_config["gradient_accumulation_steps"], train_config)


if __name__ == "__main__":
    main()
