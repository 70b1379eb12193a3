"""A Whisper-style fine-tuning script: the tokenizer writes every transcript as
<|startoftranscript|> <|lang|> <|task|> <|notimestamps|> text <|endoftext|>, and a
DataCollatorSpeechSeq2SeqWithPadding pads the input features and the labels (padding -> -100) and
is meant to cut the leading start token because the model prepends decoder_start_token_id itself
when it shifts the labels right. The collator compares the first label with
tokenizer.bos_token_id, which for this tokenizer is <|endoftext|>, not <|startoftranscript|>, so
the check never fires: every decoder input begins with the start token twice and the model is
trained to predict <|startoftranscript|> after <|startoftranscript|>, while generation starts
from a single one. A small trainer class runs AdamW with linear warmup/decay over the batches.

Thread: https://github.com/huggingface/transformers/issues/29973
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

N_MELS, FRAMES_PER_WORD, N_WORDS = 16, 6, 12


class WhisperLikeTokenizer:
    eot, sot, lang, task, notimestamps = 0, 1, 2, 3, 4
    bos_token_id = eot          # as in the real tokenizer, bos_token is <|endoftext|>
    pad_token_id = eot
    vocab_size = 5 + N_WORDS

    def __call__(self, words):
        return [self.sot, self.lang, self.task, self.notimestamps] + [5 + w for w in words] + [self.eot]

    def pad(self, seqs):
        longest = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), longest), self.pad_token_id)
        mask = torch.zeros(len(seqs), longest, dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, :len(s)], mask[i, :len(s)] = torch.tensor(s), 1
        return ids, mask


@dataclass
class DataCollatorSpeechSeq2SeqWithPadding:
    tokenizer: WhisperLikeTokenizer
    decoder_start_token_id: int

    def __call__(self, features):
        longest = max(f["input_features"].shape[1] for f in features)
        batch = {"input_features": torch.stack([F.pad(f["input_features"], (0, longest - f["input_features"].shape[1]))
                                                for f in features])}
        ids, mask = self.tokenizer.pad([f["labels"] for f in features])
        labels = ids.masked_fill(mask.ne(1), -100)
        # if the start token was added by the tokenizer, cut it: the model prepends it again
        if (labels[:, 0] == self.tokenizer.bos_token_id).all().item():
            labels = labels[:, 1:]
        batch["labels"] = labels
        return batch


def shift_tokens_right(labels, pad_token_id, decoder_start_token_id):
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


class TinyWhisper(nn.Module):
    def __init__(self, vocab, d=48, decoder_start_token_id=1, pad_token_id=0):
        super().__init__()
        self.decoder_start_token_id, self.pad_token_id = decoder_start_token_id, pad_token_id
        self.conv = nn.Conv1d(N_MELS, d, 3, padding=1)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, 96, 0.0, batch_first=True), 1)
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(32, d) * 0.02)
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 4, 96, 0.0, batch_first=True), 1)
        self.proj = nn.Linear(d, vocab)

    def forward(self, input_features, labels=None, decoder_input_ids=None):
        if decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(labels, self.pad_token_id, self.decoder_start_token_id)
        memory = self.encoder(F.gelu(self.conv(input_features)).transpose(1, 2))
        n = decoder_input_ids.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        h = self.decoder(self.embed(decoder_input_ids) + self.pos[:n], memory, tgt_mask=causal)
        logits = self.proj(h)
        loss = None if labels is None else F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)
        return loss, logits


class Seq2SeqTrainer:
    def __init__(self, model, train_dataset, eval_dataset, data_collator, lr=1e-3, batch_size=16, epochs=4, warmup=10):
        self.model, self.collator = model, data_collator
        g = torch.Generator().manual_seed(0)
        self.train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=batch_size, shuffle=True,
                                                        collate_fn=data_collator, generator=g)
        self.eval_loader = torch.utils.data.DataLoader(eval_dataset, batch_size=batch_size, collate_fn=data_collator)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        total = epochs * len(self.train_loader)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / (total - warmup))))
        self.epochs = epochs

    def evaluate(self):
        self.model.eval()
        with torch.no_grad():
            losses = [self.model(**b)[0].item() for b in self.eval_loader]
        self.model.train()
        return sum(losses) / len(losses)

    def train(self):
        self.model.train()
        step = 0
        for epoch in range(self.epochs):
            for batch in self.train_loader:
                loss, _ = self.model(**batch)
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % 20 == 0:
                    print(f"step {step} loss {loss.item():.4f}")
            print(f"epoch {epoch} eval_loss {self.evaluate():.4f}")


def make_dataset(n, tokenizer, seed):
    g = torch.Generator().manual_seed(seed)
    word_sounds = torch.randn(N_WORDS, N_MELS, FRAMES_PER_WORD, generator=torch.Generator().manual_seed(5))
    items = []
    for _ in range(n):
        words = torch.randint(0, N_WORDS, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
        feats = torch.cat([word_sounds[w] for w in words], dim=1)
        items.append({"input_features": feats + 0.5 * torch.randn(feats.shape, generator=g),
                      "labels": tokenizer(words)})
    return items


@torch.no_grad()
def greedy_transcribe(model, tokenizer, feats, max_len=12):
    model.eval()
    ids = torch.tensor([[tokenizer.sot, tokenizer.lang, tokenizer.task, tokenizer.notimestamps]])
    for _ in range(max_len):
        nxt = model(feats[None], decoder_input_ids=ids)[1][0, -1].argmax().item()
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        if nxt == tokenizer.eot:
            break
    return ids[0].tolist()


def main():
    torch.manual_seed(0)
    tokenizer = WhisperLikeTokenizer()
    model = TinyWhisper(tokenizer.vocab_size, decoder_start_token_id=tokenizer.sot, pad_token_id=tokenizer.pad_token_id)
    collator = DataCollatorSpeechSeq2SeqWithPadding(tokenizer, decoder_start_token_id=tokenizer.sot)
    train_set, eval_set = make_dataset(480, tokenizer, 0), make_dataset(64, tokenizer, 1)
    Seq2SeqTrainer(model, train_set, eval_set, collator).train()
    sample = eval_set[0]
    print("reference:", sample["labels"])
    print("greedy   :", greedy_transcribe(model, tokenizer, sample["input_features"]))


if __name__ == "__main__":
    main()
