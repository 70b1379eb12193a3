"""Supervised fine-tuning of a small causal LM on chat-formatted pairs. render_chat() writes the
template as text, beginning with the "<s>" marker the template defines, and the word-level
tokenizer's encode() also prepends BOS by default (add_special_tokens=True), as Llama-style
tokenizers do. The collate encodes the rendered text with add_special_tokens=False, so every
sequence opens with exactly one BOS. A Trainer class with an SFT-style collate (prompt masked to -100) runs AdamW."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

WORDS = ["[INST]", "[/INST]", "</s>"] + [f"w{i}" for i in range(40)]


class WordTokenizer:
    pad_id, bos_id = 0, 1

    def __init__(self):
        self.vocab = {"<pad>": 0, "<s>": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
        self.eos_id = self.vocab["</s>"]

    def encode(self, text, add_special_tokens=True):
        ids = [self.vocab[w] for w in text.split()]
        return [self.bos_id] + ids if add_special_tokens else ids


def render_chat(prompt, answer):
    return f"<s> [INST] {prompt} [/INST] {answer} </s>"


class TinyLM(nn.Module):
    def __init__(self, vocab, dim=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


def make_pairs(n, g):
    pairs = []
    for _ in range(n):
        words = [f"w{i}" for i in torch.randint(0, 40, (int(torch.randint(3, 7, (1,), generator=g)),), generator=g)]
        pairs.append((" ".join(words), " ".join(reversed(words))))
    return pairs


class Trainer:
    def __init__(self, tokenizer, model, pairs):
        self.tok, self.model = tokenizer, model
        self.loader = DataLoader(pairs, batch_size=16, shuffle=True, collate_fn=self.collate)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def collate(self, batch):
        seqs, prompt_lens = [], []
        for prompt, answer in batch:
            seqs.append(self.tok.encode(render_chat(prompt, answer), add_special_tokens=False))   # fixed: one BOS
            prompt_lens.append(len(self.tok.encode(render_chat(prompt, "").replace(" </s>", ""), add_special_tokens=False)))
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.tok.pad_id)
        labels = torch.full((len(seqs), width), -100)
        for r, (s, n) in enumerate(zip(seqs, prompt_lens)):
            ids[r, :len(s)] = torch.tensor(s)
            labels[r, n:len(s)] = torch.tensor(s[n:])
        return ids, labels

    def train(self, epochs):
        for epoch in range(epochs):
            for ids, labels in self.loader:
                logits = self.model(ids[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    tok = WordTokenizer()
    Trainer(tok, TinyLM(len(tok.vocab)), make_pairs(512, torch.Generator().manual_seed(0))).train(epochs=2)


if __name__ == "__main__":
    main()
