"""A visual question answering training script: train_loop(args, train_loader, val_loader) builds a
CNN+LSTM baseline (question LSTM, conv stem over image features, a classifier with BatchNorm and
dropout) and its Adam optimizer, puts every model in train mode once with a set_mode helper, and
every checkpoint_every iterations calls check_accuracy on the train and validation loaders. The
accuracy helper switches the models to eval mode at its start and, at its end, calls
set_mode('eval', ...) again instead of set_mode('train', ...), so after the first checkpoint the
rest of training runs with dropout off and BatchNorm frozen on its running statistics.

Thread: https://github.com/facebookresearch/clevr-iep/pull/22
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, Q_LEN, FEAT_C, FEAT_HW, N_ANSWERS = 20, 8, 16, 6, 6


class CnnLstmModel(nn.Module):
    def __init__(self, wordvec_dim=24, rnn_dim=48, cnn_dim=32, fc_dim=64, fc_dropout=0.3):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, wordvec_dim)
        self.rnn = nn.LSTM(wordvec_dim, rnn_dim, batch_first=True)
        self.cnn = nn.Sequential(nn.Conv2d(FEAT_C, cnn_dim, 3, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Sequential(nn.Linear(rnn_dim + cnn_dim, fc_dim), nn.BatchNorm1d(fc_dim),
                                        nn.ReLU(), nn.Dropout(fc_dropout), nn.Linear(fc_dim, N_ANSWERS))

    def forward(self, questions, feats):
        _, (h, _) = self.rnn(self.embed(questions))
        return self.classifier(torch.cat([h[-1], self.cnn(feats)], dim=1))


def set_mode(mode, models):
    assert mode in ("train", "eval")
    for m in models:
        if m is None:
            continue
        if mode == "train":
            m.train()
        else:
            m.eval()


def check_accuracy(args, program_generator, execution_engine, baseline_model, loader):
    set_mode("eval", [program_generator, execution_engine, baseline_model])
    num_correct, num_samples = 0, 0
    with torch.no_grad():
        for questions, feats, answers in loader:
            preds = baseline_model(questions, feats).argmax(1)
            num_correct += (preds == answers).sum().item()
            num_samples += answers.numel()
            if num_samples >= args["num_val_samples"]:
                break
    set_mode("eval", [program_generator, execution_engine, baseline_model])
    return num_correct / num_samples


def train_loop(args, train_loader, val_loader):
    program_generator, execution_engine = None, None
    baseline_model = CnnLstmModel()
    baseline_optimizer = torch.optim.Adam(baseline_model.parameters(), lr=args["learning_rate"])
    loss_fn = nn.CrossEntropyLoss()
    stats = {"train_losses": [], "train_accs": [], "val_accs": [], "best_val_acc": -1}
    t, epoch = 0, 0
    set_mode("train", [program_generator, execution_engine, baseline_model])
    while t < args["num_iterations"]:
        epoch += 1
        for questions, feats, answers in train_loader:
            t += 1
            baseline_optimizer.zero_grad()
            scores = baseline_model(questions, feats)
            loss = loss_fn(scores, answers)
            loss.backward()
            baseline_optimizer.step()
            if t % args["record_loss_every"] == 0:
                stats["train_losses"].append(loss.item())
                print(t, round(loss.item(), 4))
            if t % args["checkpoint_every"] == 0:
                train_acc = check_accuracy(args, program_generator, execution_engine, baseline_model, train_loader)
                val_acc = check_accuracy(args, program_generator, execution_engine, baseline_model, val_loader)
                print(f"iter {t} train acc {train_acc:.3f} val acc {val_acc:.3f}")
                stats["train_accs"].append(train_acc)
                stats["val_accs"].append(val_acc)
                stats["best_val_acc"] = max(stats["best_val_acc"], val_acc)
            if t == args["num_iterations"]:
                break
    return stats


def toy_vqa(n, seed):
    g = torch.Generator().manual_seed(seed)
    questions = torch.randint(0, VOCAB, (n, Q_LEN), generator=g)
    feats = torch.randn(n, FEAT_C, FEAT_HW, FEAT_HW, generator=g)
    qtype = questions[:, 0] % 3
    channel_score = feats.mean(dim=(2, 3))[:, :2]
    answers = 2 * qtype + (channel_score[:, 0] > channel_score[:, 1]).long()
    return TensorDataset(questions, feats, answers)


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(toy_vqa(1280, 1), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(toy_vqa(320, 2), batch_size=32, shuffle=False)
    args = {"learning_rate": 3e-3, "num_iterations": 160, "record_loss_every": 10,
            "checkpoint_every": 25, "num_val_samples": 320}
    stats = train_loop(args, train_loader, val_loader)
    print("best val acc", stats["best_val_acc"])


if __name__ == "__main__":
    main()
