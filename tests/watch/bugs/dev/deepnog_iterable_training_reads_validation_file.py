"""A DeepNOG-style protein orthologous-group classifier: a fit(architecture, training_sequences,
validation_sequences, ...) helper builds one dataset per sequence file (an in-memory, iterable
ProteinIterableDataset when shuffle=False, a shuffle-buffer dataset otherwise), then
_train_and_validate_model loops over epochs and the 'train' and 'val' phases with Adam, a StepLR
stepped after each training phase and a deep copy of the weights with the best validation accuracy.
The network embeds amino acids, runs parallel Conv1d filters, max-pools and classifies.

Bug: in the shuffle=False branch fit() builds the training dataset from validation_sequences instead
of training_sequences, so the model is fitted on the validation file and validated on the very same
sequences. Training runs normally, the validation accuracy climbs to the training accuracy, and the
five times larger training file is never read; on proteins from neither file the model is much worse
than its validation score says.

Thread: https://github.com/univieCUBE/deepnog/pull/43
"""
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

N_GROUPS, SEQ_LEN = 8, 60
SEQUENCE_FILES = {}  # stands in for FASTA files on disk: path -> (sequences, labels)


def simulate_file(path, n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, N_GROUPS, (n,), generator=g)
    seqs = torch.randint(1, 21, (n, SEQ_LEN), generator=g)
    for i in range(n):  # each group carries a short motif somewhere, plus residue noise
        pos = torch.randint(0, SEQ_LEN - 4, (1,), generator=g).item()
        seqs[i, pos:pos + 4] = 1 + (torch.arange(4) * 3 + labels[i] * 2) % 20
        noise = torch.rand(SEQ_LEN, generator=g) < 0.12
        seqs[i, noise] = torch.randint(1, 21, (int(noise.sum()),), generator=g)
    SEQUENCE_FILES[path] = (seqs, labels)


class ProteinIterableDataset(IterableDataset):
    def __init__(self, file):
        self.file = file
        self.sequences, self.labels = SEQUENCE_FILES[file]

    def __iter__(self):
        return iter(zip(self.sequences, self.labels))

    def __len__(self):
        return len(self.labels)


class ShuffledProteinDataset(ProteinIterableDataset):
    def __iter__(self):
        order = torch.randperm(len(self.labels))
        return iter(zip(self.sequences[order], self.labels[order]))


class DeepNOG(nn.Module):
    def __init__(self, n_classes, emb=10, filters=40, kernels=(8, 12, 16)):
        super().__init__()
        self.encoding = nn.Embedding(21, emb, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(emb, filters, k) for k in kernels)
        self.classification1 = nn.Linear(filters * len(kernels), n_classes)

    def forward(self, x):
        h = self.encoding(x).transpose(1, 2)
        h = torch.cat([torch.relu(c(h)).max(dim=2).values for c in self.convs], dim=1)
        return self.classification1(h)


def _train_and_validate_model(model, criterion, optimizer, scheduler, data_loaders, num_epochs):
    best_acc, best_wts = 0.0, copy.deepcopy(model.state_dict())
    for epoch in range(num_epochs):
        for phase in ["train", "val"]:
            model.train() if phase == "train" else model.eval()
            n, corrects, running_loss = 0, 0, 0.0
            for sequences, labels in data_loaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(sequences)
                    loss = criterion(outputs, labels.long())
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                n += len(labels)
                corrects += (outputs.argmax(1) == labels).sum().item()
                running_loss += loss.item() * len(labels)
            print(f"epoch {epoch} {phase} loss {running_loss / n:.4f} acc {corrects / n:.4f}")
            if phase == "train":
                scheduler.step()
            if phase == "val" and corrects / n > best_acc:
                best_acc, best_wts = corrects / n, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_wts)
    print(f"best val acc {best_acc:.4f}")
    return model


def fit(architecture, training_sequences, validation_sequences, *, n_epochs=5, shuffle=False,
        learning_rate=1e-2, batch_size=16):
    if shuffle:
        dataset = ShuffledProteinDataset(training_sequences)
    else:
        dataset = ProteinIterableDataset(validation_sequences)
    validation_dataset = ProteinIterableDataset(validation_sequences)
    loaders = {"train": DataLoader(dataset, batch_size=batch_size),
               "val": DataLoader(validation_dataset, batch_size=batch_size)}
    model = architecture(N_GROUPS)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.75)
    return _train_and_validate_model(model, nn.CrossEntropyLoss(), optimizer, scheduler, loaders, n_epochs)


def main():
    torch.manual_seed(0)
    simulate_file("train.fa", 1600, seed=1)
    simulate_file("val.fa", 320, seed=2)
    simulate_file("new_genomes.fa", 800, seed=3)
    model = fit(DeepNOG, "train.fa", "val.fa", n_epochs=5, shuffle=False)
    model.eval()
    seqs, labels = SEQUENCE_FILES["new_genomes.fa"]
    with torch.no_grad():
        acc = (model(seqs).argmax(1) == labels).float().mean().item()
    print(f"accuracy on proteins from new genomes {acc:.4f}")


if __name__ == "__main__":
    main()
