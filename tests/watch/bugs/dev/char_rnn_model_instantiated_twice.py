"""A char-RNN name classifier written as a script: the RNN is built and the optimizer is made from its
parameters, then further down, just before the training loop, the model is instantiated a second
time; train(category_tensor, line_tensor) uses the new global rnn while the optimizer steps the old
one, so nothing the loss sees ever changes.

Thread: https://github.com/spro/practical-pytorch/issues/9
"""
import random

import torch
from torch import nn

all_letters = "abcdefghijklmnopqrstuvwxyz"
n_letters = len(all_letters)
all_categories = ["first", "second", "third", "fourth"]
n_categories = len(all_categories)


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.softmax(self.i2o(combined))
        return output, hidden

    def init_hidden(self):
        return torch.zeros(1, self.hidden_size)


def line_to_tensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][all_letters.find(letter)] = 1
    return tensor


def random_training_pair(rng):
    c = rng.randrange(n_categories)
    letters = all_letters[c * 6:(c + 1) * 6]  # each category uses its own letters
    line = "".join(rng.choice(letters) for _ in range(rng.randint(3, 7)))
    return c, line, torch.tensor([c]), line_to_tensor(line)


n_hidden = 64
rnn = RNN(n_letters, n_hidden, n_categories)
learning_rate = 0.005
optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)
criterion = nn.NLLLoss()


def train(category_tensor, line_tensor):
    rnn.zero_grad()
    hidden = rnn.init_hidden()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    optimizer.step()
    return output, loss.item()


rnn = RNN(n_letters, n_hidden, n_categories)

if __name__ == "__main__":
    torch.manual_seed(0)
    rng = random.Random(0)
    n_iters, print_every = 600, 100
    current_loss = 0.0
    for it in range(1, n_iters + 1):
        category, line, category_tensor, line_tensor = random_training_pair(rng)
        output, loss = train(category_tensor, line_tensor)
        current_loss += loss
        if it % print_every == 0:
            print(f"{it} average loss {current_loss / print_every:.4f}")
            current_loss = 0.0
