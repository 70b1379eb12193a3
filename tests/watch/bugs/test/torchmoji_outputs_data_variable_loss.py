"""A fine-tuning helper fit_model(model, loss_op, optim_op, train_gen, epochs) for a pretrained text
classifier whose forward() returns outputs.data when return_tensor is set; backward() then raised
"does not require grad", and wrapping the loss as Variable(loss, requires_grad=True) silenced it:
the loss is a fresh leaf, so the model gets no gradient and the validation loss never moves.

Thread: https://github.com/huggingface/torchMoji/issues/21
"""
import torch
from torch import nn
from torch.autograd import Variable
from torch.utils.data import DataLoader, TensorDataset


class TorchMoji(nn.Module):
    def __init__(self, nb_classes, nb_tokens=300, embed_dim=32, hidden=32, return_tensor=True):
        super().__init__()
        self.embed = nn.Embedding(nb_tokens, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.attention = nn.Linear(2 * hidden, 1)
        self.output_layer = nn.Linear(2 * hidden, nb_classes)
        self.return_tensor = return_tensor

    def forward(self, input_seqs):
        h, _ = self.lstm(self.embed(input_seqs))
        weights = torch.softmax(self.attention(h).squeeze(-1), dim=1)
        outputs = self.output_layer((weights.unsqueeze(-1) * h).sum(1))
        if self.return_tensor:
            outputs = outputs.data
        return outputs


def evaluate(model, loss_op, val_gen):
    model.eval()
    with torch.no_grad():
        return sum(loss_op(model(x), y).item() for x, y in val_gen) / len(val_gen)


def fit_model(model, loss_op, optim_op, train_gen, val_gen, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_gen:
            optim_op.zero_grad()
            output = model(x)
            loss = loss_op(output, y)
            loss = Variable(loss, requires_grad=True)
            loss.backward()
            optim_op.step()
        print(f"epoch {epoch + 1} val acc loss {evaluate(model, loss_op, val_gen):.5f}")


def youtube_like(n, seed, tokens=300, length=20):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randint(0, tokens, (n, length), generator=g)
    x[:, :4] = torch.where(y.view(-1, 1) == 1, x[:, :4] % 50, 150 + x[:, :4] % 50)  # sentiment words
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    model = TorchMoji(nb_classes=2)
    train_gen = DataLoader(youtube_like(1024, 0), batch_size=32, shuffle=True,
                           generator=torch.Generator().manual_seed(0))
    val_gen = DataLoader(youtube_like(256, 1), batch_size=128)
    optim_op = torch.optim.Adam(model.parameters(), lr=1e-3)
    fit_model(model, nn.CrossEntropyLoss(), optim_op, train_gen, val_gen, epochs=3)


if __name__ == "__main__":
    main()
