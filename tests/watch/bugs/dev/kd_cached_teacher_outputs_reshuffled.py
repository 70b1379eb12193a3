"""Knowledge distillation of a small CNN student from a pretrained teacher, script-style:
train_and_evaluate_kd() puts the teacher in eval mode, runs fetch_teacher_outputs() once over the
training DataLoader to cache the teacher's logits batch by batch, then for every epoch calls
train_kd(model, teacher_outputs, optimizer, loss_fn_kd, dataloader, ...), which takes
teacher_outputs[i] for the i-th batch and combines a temperature-scaled KL term (weight
alpha * T * T) with cross-entropy on the labels (weight 1 - alpha). The training DataLoader has
shuffle=True, so every pass over it draws a new order: the cached i-th teacher batch belongs to
other images than the i-th student batch, and the student is distilled toward the teacher's
predictions for the wrong inputs.

Thread: https://github.com/haitongli/knowledge-distillation-pytorch/pull/17
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PARAMS = {"alpha": 0.9, "temperature": 20, "learning_rate": 1e-3, "batch_size": 128, "num_epochs": 5,
          "dropout_rate": 0.1, "num_channels": 16, "save_summary_steps": 8}
PROTOS = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(7))


class Net(nn.Module):
    def __init__(self, params):
        super().__init__()
        c = params["num_channels"]
        self.conv1 = nn.Conv2d(3, c, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, 2 * c, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * c)
        self.fc1 = nn.Linear(2 * c * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)
        self.dropout_rate = params["dropout_rate"]

    def forward(self, s):
        s = F.max_pool2d(F.relu(self.bn1(self.conv1(s))), 2)
        s = F.max_pool2d(F.relu(self.bn2(self.conv2(s))), 2)
        s = F.dropout(F.relu(self.fc1(s.flatten(1))), p=self.dropout_rate, training=self.training)
        return self.fc2(s)


class TeacherNet(nn.Module):
    """Stands in for the teacher restored from its checkpoint: a fixed template classifier."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3 * 16 * 16, 10)
        with torch.no_grad():
            w = PROTOS.flatten(1)
            self.fc.weight.copy_(w / 60)
            self.fc.bias.copy_(-(w * w).sum(1) / 120)

    def forward(self, x):
        return self.fc(x.flatten(1))


def loss_fn_kd(outputs, labels, teacher_outputs, params):
    alpha, T = params["alpha"], params["temperature"]
    kd = nn.KLDivLoss(reduction="batchmean")(F.log_softmax(outputs / T, dim=1),
                                             F.softmax(teacher_outputs / T, dim=1))
    return kd * (alpha * T * T) + F.cross_entropy(outputs, labels) * (1.0 - alpha)


def accuracy(outputs, labels):
    return (outputs.argmax(1) == labels).float().mean().item()


def fetch_teacher_outputs(teacher_model, dataloader):
    teacher_model.eval()
    teacher_outputs = []
    with torch.no_grad():
        for data_batch, _ in dataloader:
            teacher_outputs.append(teacher_model(data_batch))
    return teacher_outputs


def train_kd(model, teacher_outputs, optimizer, loss_fn_kd, dataloader, params):
    model.train()
    summ = []
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        output_batch = model(train_batch)
        output_teacher_batch = teacher_outputs[i]
        loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch, params)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % params["save_summary_steps"] == 0:
            summ.append({"accuracy": accuracy(output_batch, labels_batch), "loss": loss.item()})
    print("- Train metrics: " + " ; ".join(f"{k}: {sum(s[k] for s in summ) / len(summ):05.3f}" for k in summ[0]))


def evaluate_kd(model, dataloader):
    model.eval()
    with torch.no_grad():
        accs = [accuracy(model(x), y) for x, y in dataloader]
    return {"accuracy": sum(accs) / len(accs)}


def train_and_evaluate_kd(model, teacher_model, train_dataloader, val_dataloader, optimizer, loss_fn_kd,
                          params):
    best_val_acc = 0.0
    teacher_model.eval()
    teacher_outputs = fetch_teacher_outputs(teacher_model, train_dataloader)
    print("- Finished computing teacher outputs")
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.2)
    for epoch in range(params["num_epochs"]):
        print(f"Epoch {epoch + 1}/{params['num_epochs']}")
        train_kd(model, teacher_outputs, optimizer, loss_fn_kd, train_dataloader, params)
        scheduler.step()
        val_acc = evaluate_kd(model, val_dataloader)["accuracy"]
        best_val_acc = max(best_val_acc, val_acc)
        print(f"- Eval metrics: accuracy: {val_acc:05.3f} (best {best_val_acc:05.3f})")


def images(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(PROTOS[y] + 1.5 * torch.randn(n, 3, 16, 16, generator=g), y)


def main():
    torch.manual_seed(230)
    train_dl = DataLoader(images(2048, 1), batch_size=PARAMS["batch_size"], shuffle=True,
                          generator=torch.Generator().manual_seed(230))
    dev_dl = DataLoader(images(512, 2), batch_size=PARAMS["batch_size"])
    model = Net(PARAMS)
    optimizer = torch.optim.Adam(model.parameters(), lr=PARAMS["learning_rate"])
    teacher_model = TeacherNet()
    train_and_evaluate_kd(model, teacher_model, train_dl, dev_dl, optimizer, loss_fn_kd, PARAMS)


if __name__ == "__main__":
    main()
