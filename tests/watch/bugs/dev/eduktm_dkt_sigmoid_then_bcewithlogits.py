"""Deep Knowledge Tracing in the style of a knowledge-tracing toolkit: a Net with an nn.RNN over
one-hot (question, correctness) inputs and a linear layer per question, wrapped by a DKT class whose
train(train_data, test_data, epoch, lr) builds the criterion and Adam itself, gathers, student by
student, the prediction for the next question from the output row and sums the per-student losses,
and whose eval() reports AUC. Net.forward already ends in torch.sigmoid, yet train() uses
nn.BCEWithLogitsLoss, which applies a second sigmoid: the loss sees probabilities squeezed into
[0.5, 0.73], its gradients are small and flattened, and the model trains to a lower AUC.

Thread: https://github.com/bigdata-ustc/EduKTM/issues/15
"""
import numpy as np
import torch
from torch import nn

NUM_Q, SEQ = 40, 30


def auc_score(labels, scores):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1)


class Net(nn.Module):
    def __init__(self, num_questions, hidden_size, num_layers):
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.rnn = nn.RNN(num_questions * 2, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_questions)

    def forward(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size)
        out, _ = self.rnn(x, h0)
        return torch.sigmoid(self.fc(out))


def next_question_pred(one_hot_seq, pred_seq, num_questions):
    active = torch.nonzero(one_hot_seq)[:, 1]
    questions = active[1:] % num_questions
    truth = active[1:] // num_questions
    pred = pred_seq[:len(questions)].gather(1, questions.view(-1, 1)).flatten()
    return pred, truth


class DKT:
    def __init__(self, num_questions, hidden_size, num_layers):
        self.num_questions = num_questions
        self.net = Net(num_questions, hidden_size, num_layers)

    def train(self, train_data, test_data=None, *, epoch, lr=0.002):
        loss_function = nn.BCEWithLogitsLoss()
        optimizer = torch.optim.Adam(self.net.parameters(), lr)
        for e in range(epoch):
            self.net.train()
            losses = []
            for batch in train_data():
                batch_pred = self.net(batch)
                loss = torch.zeros(1)
                for student in range(batch.shape[0]):
                    pred, truth = next_question_pred(batch[student], batch_pred[student], self.num_questions)
                    loss = loss + loss_function(pred, truth.float())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            print(f"[Epoch {e}] LogisticLoss: {np.mean(losses):.6f}")
            if test_data is not None:
                print(f"[Epoch {e}] auc: {self.eval(test_data):.6f}")

    def eval(self, test_data):
        self.net.eval()
        preds, truths = [], []
        with torch.no_grad():
            for batch in test_data():
                batch_pred = self.net(batch)
                for student in range(batch.shape[0]):
                    pred, truth = next_question_pred(batch[student], batch_pred[student], self.num_questions)
                    preds.append(pred)
                    truths.append(truth)
        return auc_score(torch.cat(truths).numpy(), torch.cat(preds).numpy())


def make_sequences(n, g, skill_of, difficulty):
    ability = torch.randn(n, 4, generator=g)
    questions = torch.randint(0, NUM_Q, (n, SEQ), generator=g)
    p = torch.sigmoid(2.0 * (ability.gather(1, skill_of[questions]) - difficulty[questions]))
    correct = (torch.rand(n, SEQ, generator=g) < p).long()
    one_hot = torch.zeros(n, SEQ, 2 * NUM_Q)
    one_hot.scatter_(2, (questions + NUM_Q * correct).unsqueeze(-1), 1.0)
    return one_hot


def batches(data, batch_size, g, shuffle):
    def it():
        idx = torch.randperm(len(data), generator=g) if shuffle else torch.arange(len(data))
        for s in range(0, len(data), batch_size):
            yield data[idx[s:s + batch_size]]
    return it


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    skill_of = torch.randint(0, 4, (NUM_Q,), generator=g)
    difficulty = 0.5 * torch.randn(NUM_Q, generator=g)
    train = make_sequences(640, g, skill_of, difficulty)
    test = make_sequences(160, g, skill_of, difficulty)
    model = DKT(NUM_Q, hidden_size=32, num_layers=1)
    model.train(batches(train, 32, g, True), batches(test, 64, g, False), epoch=4, lr=0.002)


if __name__ == "__main__":
    main()
