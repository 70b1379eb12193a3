"""A knowledge-tracing model (an LSTM over one-hot question/answer interactions) whose forward ends in
torch.sigmoid over all questions. The training helper gathers, for every student, the prediction
for the question answered next, and scores it with nn.BCELoss, which takes probabilities."""
import torch
from torch import nn

QUESTIONS, STEPS = 20, 12


class KnowledgeTracer(nn.Module):
    def __init__(self, hidden=48):
        super().__init__()
        self.lstm = nn.LSTM(2 * QUESTIONS, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, QUESTIONS)

    def forward(self, interactions):
        out, _ = self.lstm(interactions)
        return torch.sigmoid(self.fc(out))   # probabilities per question


def make_students(g, size=32):
    skill = torch.rand(size, QUESTIONS, generator=g)
    questions = torch.randint(0, QUESTIONS, (size, STEPS), generator=g)
    correct = (torch.rand(size, STEPS, generator=g) < skill.gather(1, questions)).float()
    x = torch.zeros(size, STEPS, 2 * QUESTIONS)
    x.scatter_(2, (questions + QUESTIONS * correct.long()).unsqueeze(2), 1.0)
    return x, questions, correct


def train_epoch(model, optimizer, criterion, g, batches):
    for _ in range(batches):
        x, questions, correct = make_students(g)
        probs = model(x)[:, :-1]
        next_pred = probs.gather(2, questions[:, 1:].unsqueeze(2)).squeeze(2).reshape(-1)
        loss = criterion(next_pred, correct[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = KnowledgeTracer()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.BCELoss()   # fixed: the model already outputs probabilities
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(model, optimizer, criterion, g, batches=24):.4f}")


if __name__ == "__main__":
    main()
