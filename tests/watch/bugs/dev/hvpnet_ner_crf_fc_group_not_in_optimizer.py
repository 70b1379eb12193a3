"""A multimodal NER trainer in the HVPNeT style: a Trainer class whose multiModal_before_train()
builds AdamW parameter groups by matching parameter names, one group for the text encoder
("bert"), one for the visual-prompt parts ("encoder_conv", "gates"), and one with its own large
learning rate for the emission layer "fc" and the CRF. The CRF/fc group is filled but never
appended to the list handed to AdamW, so the emission projection and the CRF transition scores
keep their initial values for the whole run. Backward still fills their .grad; only the encoder
learns, against a frozen random projection and random transition scores, so the sequence loss
falls more slowly and settles higher than it should, with no error.

Thread: https://github.com/zjunlp/HVPNeT/issues/5
"""
import torch
import torch.nn.functional as F
from torch import nn

NUM_LABELS = 5
VOCAB = 60


class CRF(nn.Module):
    def __init__(self, num_tags):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

    def forward(self, emissions, tags):  # mean negative log-likelihood, full-length sequences
        b, t, _ = emissions.shape
        ar = torch.arange(b)
        score = self.start_transitions[tags[:, 0]] + emissions[ar, 0, tags[:, 0]]
        for i in range(1, t):
            score = score + self.transitions[tags[:, i - 1], tags[:, i]] + emissions[ar, i, tags[:, i]]
        score = score + self.end_transitions[tags[:, -1]]
        alpha = self.start_transitions + emissions[:, 0]
        for i in range(1, t):
            alpha = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + emissions[:, i].unsqueeze(1), dim=1)
        log_z = torch.logsumexp(alpha + self.end_transitions, dim=1)
        return (log_z - score).mean()

    @torch.no_grad()
    def decode(self, emissions):
        b, t, _ = emissions.shape
        score = self.start_transitions + emissions[:, 0]
        history = []
        for i in range(1, t):
            best, idx = (score.unsqueeze(2) + self.transitions).max(dim=1)
            score = best + emissions[:, i]
            history.append(idx)
        last = (score + self.end_transitions).argmax(-1)
        path = [last]
        for idx in reversed(history):
            last = idx.gather(1, last.unsqueeze(1)).squeeze(1)
            path.append(last)
        return torch.stack(path[::-1], dim=1)


class TextEncoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * dim, dim)

    def forward(self, input_ids):
        return torch.tanh(self.proj(self.rnn(self.embeddings(input_ids))[0]))


class HMNeTNERModel(nn.Module):
    def __init__(self, dim=32, img_dim=24):
        super().__init__()
        self.bert = TextEncoder(dim)
        self.image_model = nn.Linear(img_dim, dim)  # stands in for the frozen ResNet
        self.encoder_conv = nn.Linear(dim, dim)
        self.gates = nn.Linear(2 * dim, 1)
        self.fc = nn.Linear(dim, NUM_LABELS)
        self.crf = CRF(NUM_LABELS)

    def emissions(self, input_ids, images):
        text = self.bert(input_ids)
        prompt = torch.relu(self.encoder_conv(self.image_model(images))).unsqueeze(1).expand_as(text)
        gate = torch.sigmoid(self.gates(torch.cat([text, prompt], dim=-1)))
        return self.fc(text + gate * prompt)

    def forward(self, input_ids, labels, images):
        emissions = self.emissions(input_ids, images)
        return emissions, self.crf(emissions, labels)


class Trainer:
    def __init__(self, model, lr=2e-3, train_num_steps=150, warmup_ratio=0.05):
        self.model = model
        self.lr = lr
        self.train_num_steps = train_num_steps
        self.warmup_ratio = warmup_ratio
        self.step = 0

    def multiModal_before_train(self):
        parameters = []
        params = {"lr": self.lr, "weight_decay": 1e-2, "params": []}
        for name, param in self.model.named_parameters():
            if "bert" in name:
                params["params"].append(param)
        parameters.append(params)

        params = {"lr": self.lr, "weight_decay": 1e-2, "params": []}
        for name, param in self.model.named_parameters():
            if "encoder_conv" in name or "gates" in name:
                params["params"].append(param)
        parameters.append(params)

        params = {"lr": 5e-2, "weight_decay": 1e-2, "params": []}
        for name, param in self.model.named_parameters():
            if "crf" in name or name.startswith("fc"):
                params["params"].append(param)

        self.optimizer = torch.optim.AdamW(parameters)
        for name, par in self.model.named_parameters():
            if "image_model" in name:
                par.requires_grad = False
        warmup = int(self.warmup_ratio * self.train_num_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda s: (s + 1) / max(1, warmup) if s < warmup
            else max(0.0, (self.train_num_steps - s) / max(1, self.train_num_steps - warmup)))

    def _step(self, batch):
        input_ids, labels, images = batch
        emissions, loss = self.model(input_ids, labels, images)
        return labels, emissions, loss

    def train(self, batches, eval_batch):
        self.model.train()
        fc_before = self.model.fc.weight.detach().clone()
        avg_loss = 0.0
        for batch in batches:
            self.step += 1
            labels, emissions, loss = self._step(batch)
            avg_loss += loss.item()
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad()
            if self.step % 30 == 0:
                print(f"step {self.step:3d}  loss {avg_loss / 30:.4f}  "
                      f"dev token acc {self.evaluate(eval_batch):.3f}")
                avg_loss = 0.0
        moved = (self.model.fc.weight - fc_before).abs().max().item()
        print(f"fc weight max change over training: {moved:.2e}")

    @torch.no_grad()
    def evaluate(self, batch):
        self.model.eval()
        input_ids, labels, images = batch
        pred = self.model.crf.decode(self.model.emissions(input_ids, images))
        self.model.train()
        return (pred == labels).float().mean().item()


def make_batch(gen, batch_size=16, seq_len=12, img_dim=24):
    input_ids = torch.randint(0, VOCAB, (batch_size, seq_len), generator=gen)
    images = torch.randn(batch_size, img_dim, generator=gen)
    # entity tags: B (1/3) starts on marker tokens, I (2/4) follows B, O (0) elsewhere;
    # the entity type depends on the sign of the first image feature
    etype = (images[:, 0] > 0).long().unsqueeze(1)
    labels = torch.zeros_like(input_ids)
    starts = input_ids < 12
    labels[starts] = (1 + 2 * etype.expand_as(input_ids))[starts]
    follow = torch.zeros_like(starts)
    follow[:, 1:] = starts[:, :-1] & ~starts[:, 1:]
    labels[follow] = (2 + 2 * etype.expand_as(input_ids))[follow]
    return input_ids, labels, images


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = HMNeTNERModel()
    trainer = Trainer(model, train_num_steps=150)
    trainer.multiModal_before_train()
    batches = [make_batch(gen) for _ in range(150)]
    eval_batch = make_batch(torch.Generator().manual_seed(99), batch_size=64)
    trainer.train(batches, eval_batch)


if __name__ == "__main__":
    main()
