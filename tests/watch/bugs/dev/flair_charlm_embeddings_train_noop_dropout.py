"""A sequence tagger in the style of an NLP tagging library: StackedEmbeddings concatenates trainable
WordEmbeddings with CharLMEmbeddings, which run a frozen character language model over the sentence
(under no_grad) and take its state at the end of each word; the SequenceTagger projects the stacked
embedding, runs a BiLSTM and a linear tag layer; a ModelTrainer trains with the optimizer class it is given (Adam here) and, after every
epoch, calls tagger.eval() and scores the dev set. To keep the language model's dropout out of the
cached embeddings, CharLMEmbeddings overrides train(self, mode=True) with a no-op, so the recursive
eval() never reaches it: the language model stays in training mode and its dropout (p=0.5) is still
applied when the tagger is evaluated, so dev scores move from one evaluation to the next and are
lower than the model's real accuracy.

Thread: https://github.com/flairNLP/flair/issues/797
"""
import torch
from torch import nn

N_CHARS, SPACE, N_TAGS, SENT_LEN = 24, 1, 4, 10


class LanguageModel(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.encoder = nn.Embedding(N_CHARS, 32)
        self.rnn = nn.LSTM(32, hidden, batch_first=True)
        self.drop = nn.Dropout(0.5)

    def get_representation(self, chars):
        out, _ = self.rnn(self.drop(self.encoder(chars)))
        return self.drop(out)


class WordEmbeddings(nn.Module):
    def __init__(self, vocab_size, dim=32):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim)
        self.embedding_length = dim

    def embed(self, batch):
        return self.embedding(batch["word_ids"])


class CharLMEmbeddings(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.embedding_length = lm.rnn.hidden_size
        for p in self.lm.parameters():
            p.requires_grad = False

    def train(self, mode=True):
        pass   # keep the language model out of recursive train()/eval() calls

    def embed(self, batch):
        with torch.no_grad():
            states = self.lm.get_representation(batch["chars"])
        idx = batch["word_ends"].unsqueeze(-1).expand(-1, -1, states.size(-1))
        return states.gather(1, idx)


class StackedEmbeddings(nn.Module):
    def __init__(self, embeddings):
        super().__init__()
        self.embeddings = nn.ModuleList(embeddings)
        self.embedding_length = sum(e.embedding_length for e in embeddings)

    def embed(self, batch):
        return torch.cat([e.embed(batch) for e in self.embeddings], dim=-1)


class SequenceTagger(nn.Module):
    def __init__(self, embeddings, hidden_size=64):
        super().__init__()
        self.embeddings = embeddings
        self.embedding2nn = nn.Linear(embeddings.embedding_length, embeddings.embedding_length)
        self.rnn = nn.LSTM(embeddings.embedding_length, hidden_size, batch_first=True, bidirectional=True)
        self.linear = nn.Linear(2 * hidden_size, N_TAGS)

    def forward(self, batch):
        h, _ = self.rnn(self.embedding2nn(self.embeddings.embed(batch)))
        return self.linear(h)

    def forward_loss(self, batch):
        return nn.functional.cross_entropy(self(batch).reshape(-1, N_TAGS), batch["tags"].reshape(-1))


def make_lexicon(g, n_words=300):
    return [torch.randint(2, N_CHARS, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g) for _ in range(n_words)]


def make_corpus(n, g, lexicon):
    """Words are 2-5 chars; the tag is set by the word's last char (a suffix), so unseen words need the char LM."""
    n_words = len(lexicon)
    sents = []
    for _ in range(n):
        ids = torch.randint(0, n_words, (SENT_LEN,), generator=g)
        chars, ends = [], []
        for w in ids.tolist():
            chars.extend(lexicon[w].tolist())
            ends.append(len(chars) - 1)
            chars.append(SPACE)
        tags = torch.tensor([int(lexicon[w][-1]) % N_TAGS for w in ids.tolist()])
        sents.append((ids, torch.tensor(chars), torch.tensor(ends), tags))
    return sents


def collate(sents, known):
    width = max(len(s[1]) for s in sents)
    chars = torch.zeros(len(sents), width, dtype=torch.long)
    for i, s in enumerate(sents):
        chars[i, :len(s[1])] = s[1]
    word_ids = torch.stack([torch.where(known[s[0]], s[0] + 1, torch.zeros_like(s[0])) for s in sents])
    return {"word_ids": word_ids, "chars": chars, "word_ends": torch.stack([s[2] for s in sents]),
            "tags": torch.stack([s[3] for s in sents])}


class ModelTrainer:
    def __init__(self, tagger, train, dev, known, optimizer=torch.optim.SGD):
        self.tagger, self.train_set, self.dev_set, self.known = tagger, train, dev, known
        self.optimizer = optimizer

    def evaluate(self):
        self.tagger.eval()
        with torch.no_grad():
            batch = collate(self.dev_set, self.known)
            return (self.tagger(batch).argmax(-1) == batch["tags"]).float().mean().item()

    def train(self, learning_rate=0.1, mini_batch_size=32, max_epochs=3, seed=1):
        optimizer = self.optimizer(self.tagger.parameters(), lr=learning_rate)
        g = torch.Generator().manual_seed(seed)
        for epoch in range(max_epochs):
            self.tagger.train()
            order = torch.randperm(len(self.train_set), generator=g).tolist()
            for i in range(0, len(order), mini_batch_size):
                batch = collate([self.train_set[j] for j in order[i:i + mini_batch_size]], self.known)
                optimizer.zero_grad()
                loss = self.tagger.forward_loss(batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.tagger.parameters(), 5.0)
                optimizer.step()
            scores = [self.evaluate() for _ in range(3)]
            print(f"epoch {epoch} loss {loss.item():.4f} dev acc (3 evaluations) " + " ".join(f"{s:.4f}" for s in scores))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    lexicon = make_lexicon(g)
    train, dev = make_corpus(800, g, lexicon), make_corpus(200, g, lexicon)
    known = torch.rand(300, generator=g) < 0.6   # 40% of word types are out of the word vocabulary
    embeddings = StackedEmbeddings([WordEmbeddings(301), CharLMEmbeddings(LanguageModel())])
    tagger = SequenceTagger(embeddings)
    ModelTrainer(tagger, train, dev, known, optimizer=torch.optim.Adam).train(learning_rate=3e-3)


if __name__ == "__main__":
    main()
