"""SFTTrainer-style fine-tuning on a conversational ("messages") dataset: a formatting function
renders every conversation with `tokenizer.apply_chat_template(messages, tokenize=False)`, whose
template already writes the BOS token into the text, and the trainer then tokenizes that text
with the tokenizer's default `add_special_tokens=True`, which prepends BOS again. Every training
sequence therefore starts `<s><s>` and every token sits one position later than at serving time,
where the prompt is built with `apply_chat_template(..., tokenize=True)` and has a single BOS.
A small causal transformer with learned positions is trained this way and then served: the
answers learned at the shifted positions do not carry over to the single-BOS prompts.
Thread: https://github.com/huggingface/trl/issues/1400
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 40
PAD, BOS, EOS, USER, ASSIST = 0, 1, 2, 3, 4
FIRST_WORD = 8
MAX_LEN = 16


class ChatTokenizer:
    """Llama-like: encoding text prepends BOS unless add_special_tokens=False; the chat template
    itself starts with the BOS token. 'Text' is a list of symbols to keep things tiny."""

    bos_token, eos_token = "<s>", "</s>"
    vocab = {"<pad>": PAD, "<s>": BOS, "</s>": EOS, "[USER]": USER, "[ASSISTANT]": ASSIST}

    def convert(self, sym):
        return self.vocab[sym] if isinstance(sym, str) else sym

    def __call__(self, text, add_special_tokens=True):
        ids = [self.convert(s) for s in text]
        if add_special_tokens:
            ids = [BOS] + ids
        return {"input_ids": ids}

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        text = [self.bos_token]
        for m in messages:
            if m["role"] == "user":
                text += ["[USER]"] + m["content"]
            else:
                text += ["[ASSISTANT]"] + m["content"] + [self.eos_token]
        if add_generation_prompt:
            text += ["[ASSISTANT]"]
        if tokenize:  # tokenizing inside the template adds no extra special tokens
            return self(text, add_special_tokens=False)["input_ids"]
        return text


class TinyGPT(nn.Module):
    def __init__(self, dim=64, layers=2, heads=4):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(MAX_LEN, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, labels=None):
        T = input_ids.shape[1]
        x = self.tok(input_ids) + self.pos(torch.arange(T))
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        logits = self.lm_head(self.blocks(x, mask=mask, is_causal=True))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1),
                                          ignore_index=-100)
        return out


def make_conversations(n, seed):
    """user says 5 words; the assistant must answer the 2nd and the 4th word, in that order."""
    g = torch.Generator().manual_seed(seed)
    convs = []
    for _ in range(n):
        words = (torch.randint(0, VOCAB - FIRST_WORD, (5,), generator=g) + FIRST_WORD).tolist()
        convs.append([{"role": "user", "content": words},
                      {"role": "assistant", "content": [words[1], words[3]]}])
    return convs


class SFTTrainer:
    """Formatting function -> text -> tokenizer(text) (default add_special_tokens=True) -> LM loss."""

    def __init__(self, model, tokenizer, train_dataset, formatting_func, lr=3e-3, batch_size=32, epochs=3):
        self.model, self.tok = model, tokenizer
        self.lr, self.bs, self.epochs = lr, batch_size, epochs
        texts = [formatting_func(ex) for ex in train_dataset]
        self.features = [self.tok(t)["input_ids"] for t in texts]

    def collate(self, feats):
        L = max(len(f) for f in feats)
        ids = torch.tensor([f + [PAD] * (L - len(f)) for f in feats])
        labels = ids.clone()
        labels[ids == PAD] = -100
        return ids, labels

    def train(self, log_every=40):
        opt = torch.optim.AdamW(self.model.parameters(), lr=self.lr)
        g = torch.Generator().manual_seed(2)
        step = 0
        print("first training example ids:", self.features[0])
        for epoch in range(self.epochs):
            for idx in torch.randperm(len(self.features), generator=g).split(self.bs):
                ids, labels = self.collate([self.features[i] for i in idx])
                loss = self.model(ids, labels=labels)["loss"]
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                if step % log_every == 0:
                    print(f"epoch {epoch} step {step:4d} | train loss {loss.item():.3f}")


@torch.no_grad()
def serve_accuracy(model, tokenizer, convs, double_bos=False):
    """Greedy answers from prompts built the way the serving stack builds them."""
    model.eval()
    correct = 0
    for conv in convs:
        prompt = tokenizer.apply_chat_template(conv[:1], tokenize=True, add_generation_prompt=True)
        if double_bos:
            prompt = [BOS] + prompt
        ids = torch.tensor([prompt])
        out = []
        for _ in range(2):
            nxt = model(ids)["logits"][0, -1].argmax().item()
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
        correct += int(out == conv[1]["content"])
    return correct / len(convs)


def main():
    torch.manual_seed(0)
    tokenizer = ChatTokenizer()
    train_convs, test_convs = make_conversations(1536, seed=0), make_conversations(200, seed=1)

    def formatting_func(example):
        return tokenizer.apply_chat_template(example, tokenize=False)

    model = TinyGPT()
    trainer = SFTTrainer(model, tokenizer, train_convs, formatting_func)
    trainer.train()
    acc = serve_accuracy(model, tokenizer, test_convs)
    acc_train_format = serve_accuracy(model, tokenizer, test_convs, double_bos=True)
    print(f"served (one BOS) exact-match accuracy: {acc:.3f}")
    print(f"same prompts with two BOS, as in training: {acc_train_format:.3f}")


if __name__ == "__main__":
    main()
