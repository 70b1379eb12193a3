"""An attention seq2seq built on a reusable Attention(dimensions, attention_type="general") module of
an NLP utility library: it takes query [batch, output_len, dim] and context [batch, query_len, dim],
scores them with a bmm, flattens the scores to [batch * output_len, query_len], normalizes them with
an nn.Softmax built in __init__, mixes the context and returns tanh(linear_out([mix; query])). The
encoder is a GRU over the source, the decoder a teacher-forced GRU over the shifted target whose
outputs attend over the encoder states. The module's softmax is nn.Softmax(dim=0), so the scores are
normalized across the flattened batch-and-step rows instead of across the source positions: each
decoder step gets a tiny, batch-dependent mix of the source instead of an alignment, and the copy
task that needs attention is learned much worse.

Thread: https://github.com/PetrochukM/PyTorch-NLP/issues/2
"""
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dimensions, attention_type="general"):
        super().__init__()
        self.attention_type = attention_type
        if attention_type == "general":
            self.linear_in = nn.Linear(dimensions, dimensions, bias=False)
        self.linear_out = nn.Linear(dimensions * 2, dimensions, bias=False)
        self.softmax = nn.Softmax(dim=0)
        self.tanh = nn.Tanh()

    def forward(self, query, context):
        batch_size, output_len, dimensions = query.size()
        query_len = context.size(1)
        if self.attention_type == "general":
            query = self.linear_in(query.reshape(batch_size * output_len, dimensions))
            query = query.reshape(batch_size, output_len, dimensions)
        attention_scores = torch.bmm(query, context.transpose(1, 2).contiguous())
        attention_scores = attention_scores.view(batch_size * output_len, query_len)
        attention_weights = self.softmax(attention_scores)
        attention_weights = attention_weights.view(batch_size, output_len, query_len)
        mix = torch.bmm(attention_weights, context)
        combined = torch.cat((mix, query), dim=2).view(batch_size * output_len, 2 * dimensions)
        output = self.tanh(self.linear_out(combined)).view(batch_size, output_len, dimensions)
        return output, attention_weights


class AttnSeq2Seq(nn.Module):
    def __init__(self, vocab, dim=64):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, dim)
        self.tgt_embed = nn.Embedding(vocab, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.decoder = nn.GRU(dim, dim, batch_first=True)
        self.attention = Attention(dim, attention_type="general")
        self.generator = nn.Linear(dim, vocab)

    def forward(self, src, tgt_in):
        context, hidden = self.encoder(self.src_embed(src))
        dec_out, _ = self.decoder(self.tgt_embed(tgt_in), hidden)
        attended, _ = self.attention(dec_out, context)
        return self.generator(attended)


def copy_task(n, vocab, length, seed):
    """Target is the source shuffled by a fixed permutation of positions, so each step must look it up."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(length, generator=torch.Generator().manual_seed(11))
    src = torch.randint(2, vocab, (n, length), generator=g)
    tgt = src[:, perm]
    tgt_in = torch.cat([torch.zeros(n, 1, dtype=torch.long), tgt[:, :-1]], dim=1)  # 0 is <bos>
    return src, tgt_in, tgt


def train(model, optimizer, data, epochs, batch_size, g):
    src, tgt_in, tgt = data
    criterion = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(epochs):
        model.train()
        for idx in torch.randperm(len(src), generator=g).split(batch_size):
            logits = model(src[idx], tgt_in[idx])
            loss = criterion(logits.reshape(-1, logits.size(-1)), tgt[idx].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 25 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    vocab, length = 20, 8
    data = copy_task(1600, vocab, length, seed=0)
    model = AttnSeq2Seq(vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    train(model, optimizer, data, epochs=3, batch_size=32, g=torch.Generator().manual_seed(1))
    model.eval()
    src, tgt_in, tgt = copy_task(320, vocab, length, seed=1)
    with torch.no_grad():
        acc = (model(src, tgt_in).argmax(-1) == tgt).float().mean().item()
    print(f"held-out token accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
