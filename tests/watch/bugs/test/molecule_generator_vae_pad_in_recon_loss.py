"""A SMILES molecule-generator VAE: a character tokenizer pads every SMILES string to the longest one
with a <pad> index, a BetaTCVAE module (token embedding with padding_idx, transformer encoder,
per-position mu and log-variance heads, transformer decoder, linear output) is trained by a
train(model, loader, optimizer, beta, gamma) helper with Adam, and test() reports the loss and the
token accuracy. loss_function adds a reconstruction cross-entropy, a KL term and a total-correlation
style penalty.

Bug: the reconstruction term is F.cross_entropy over every position of the padded batch with the
default ignore_index, so the <pad> positions are trained as targets. Most positions of a batch of
short molecules are padding, which is trivially predictable: the logged loss starts low and falls
fast, a large share of each update goes into predicting <pad>, and the reported token accuracy is
dominated by padding while the real atoms and bonds are reconstructed far less well.

Thread: https://github.com/DaoyuanLi2816/Molecule-Generator/pull/20
"""
import torch
import torch.nn.functional as F
from torch import nn

CHARS = ["C", "O", "N", "(", ")", "=", "1", "c"]


class SimpleTokenizer:
    def __init__(self):
        self.char_to_idx = {ch: i for i, ch in enumerate(CHARS)}
        self.pad_idx = len(CHARS)

    def tokenize(self, smiles, max_len):
        ids = [self.char_to_idx[ch] for ch in smiles]
        return torch.tensor(ids + [self.pad_idx] * (max_len - len(ids)), dtype=torch.long)


def random_smiles(g):
    n = int(torch.randint(4, 14, (1,), generator=g))
    out = []
    for _ in range(n):
        r = torch.rand(1, generator=g).item()
        out.append("C" if r < 0.45 else "O" if r < 0.6 else "N" if r < 0.7 else "c1ccc" if r < 0.8 else "(C)" if r < 0.9 else "=O")
    return "".join(out)


class BetaTCVAE(nn.Module):
    def __init__(self, vocab_size, embedding_dim, hidden_dim, latent_dim, nhead, num_layers, pad_idx):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(embedding_dim, nhead, hidden_dim, dropout=0.0, batch_first=True), num_layers)
        self.mu = nn.Linear(embedding_dim, latent_dim)
        self.log_var = nn.Linear(embedding_dim, latent_dim)
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(latent_dim, nhead, hidden_dim, dropout=0.0, batch_first=True), num_layers)
        self.fc_out = nn.Linear(latent_dim, vocab_size)

    def forward(self, x):
        encoded = self.encoder(self.embedding(x))
        mu, log_var = self.mu(encoded), self.log_var(encoded)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var)
        return self.fc_out(self.decoder(z, z)), mu, log_var


def loss_function(recon_x, x, mu, log_var, beta, gamma):
    recon = F.cross_entropy(recon_x.reshape(-1, recon_x.size(-1)), x.reshape(-1), reduction="mean")
    kld = -0.5 * torch.mean(1 + log_var - mu.pow(2) - log_var.exp())
    tc = (log_var.exp() - 1 - log_var).mean()
    return recon + beta * kld + gamma * tc


def train(model, train_loader, optimizer, beta, gamma):
    model.train()
    total = 0.0
    for (x,) in train_loader:
        optimizer.zero_grad()
        recon_x, mu, log_var = model(x)
        loss = loss_function(recon_x, x, mu, log_var, beta, gamma)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(train_loader)


def test(model, test_loader, beta, gamma, pad_idx):
    model.eval()
    total, correct, count, real_correct, real_count = 0.0, 0, 0, 0, 0
    with torch.no_grad():
        for (x,) in test_loader:
            recon_x, mu, log_var = model(x)
            total += loss_function(recon_x, x, mu, log_var, beta, gamma).item()
            preds = recon_x.argmax(-1)
            correct += (preds == x).sum().item()
            count += x.numel()
            real = x != pad_idx
            real_correct += ((preds == x) & real).sum().item()
            real_count += real.sum().item()
    return total / len(test_loader), correct / count, real_correct / real_count


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tok = SimpleTokenizer()
    smiles = [random_smiles(g) for _ in range(2000)]
    max_len = max(len(s) for s in smiles)
    data = torch.stack([tok.tokenize(s, max_len) for s in smiles])
    print(f"max_len {max_len}, padding share {(data == tok.pad_idx).float().mean().item():.2f}")
    train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data[:1600]), batch_size=64,
                                               shuffle=True, generator=torch.Generator().manual_seed(0))
    test_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data[1600:]), batch_size=64)
    model = BetaTCVAE(len(CHARS) + 1, 16, 64, 16, 4, 2, tok.pad_idx)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        train_loss = train(model, train_loader, optimizer, beta=1.0, gamma=0.1)
        test_loss, acc, real_acc = test(model, test_loader, 1.0, 0.1, tok.pad_idx)
        print(f"epoch {epoch + 1} train loss {train_loss:.4f} test loss {test_loss:.4f} "
              f"test acc {acc:.4f} (non-pad tokens {real_acc:.4f})")


if __name__ == "__main__":
    main()
