"""An ADDA script for MNIST -> USPS: main() builds the source and target loaders with
get_data_loader(name), pretrains a LeNet encoder plus classifier on the source with train_src()
(Adam over both, CrossEntropyLoss), copies the source encoder into the target encoder, then
train_tgt() alternates a critic step (source features labelled 1, target features 0) and a target
encoder step (target features labelled 1), and eval_tgt() scores the source classifier on target
features. Both datasets go through the same ToTensor-style conversion and Normalize(0.5, 0.5), but
the USPS dataset class stores its images as float arrays multiplied by 255.0, and the conversion
only divides uint8 arrays by 255: MNIST reaches the network in [-1, 1], USPS in [-1, 509]. The
target encoder starts from weights fitted to the source scale and is adapted and evaluated on
inputs 255 times larger, so the target accuracy stays far below the source accuracy.

Thread: https://github.com/corenel/pytorch-adda/pull/29
"""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

params = SimpleNamespace(batch_size=50, num_epochs_pre=2, num_epochs=2, c_learning_rate=1e-4,
                         d_learning_rate=1e-4, beta1=0.5, beta2=0.9, dataset_mean=0.5, dataset_std=0.5)
GLYPHS = np.random.RandomState(5).rand(10, 7, 7) > 0.55


def to_tensor(pic):
    img = torch.from_numpy(np.ascontiguousarray(pic.transpose((2, 0, 1))))
    return img.float().div(255) if img.dtype == torch.uint8 else img.float()


def pre_process(pic):
    return (to_tensor(pic) - params.dataset_mean) / params.dataset_std


def draw_digits(labels, rng, thickness):
    imgs = np.zeros((len(labels), 28, 28), dtype=np.float32)
    for k, y in enumerate(labels):
        g = np.kron(GLYPHS[y], np.ones((3, 3)))
        dy, dx = rng.randint(2, 6, size=2)
        imgs[k, dy:dy + 21, dx:dx + 21] = g * thickness
    return np.clip(imgs + 0.08 * rng.randn(*imgs.shape), 0, 1)


class MNIST(Dataset):
    def __init__(self, n, seed, transform):
        rng = np.random.RandomState(seed)
        self.targets = rng.randint(0, 10, n)
        self.data = (draw_digits(self.targets, rng, 1.0) * 255).astype(np.uint8)[..., None]
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return self.transform(self.data[i]), int(self.targets[i])


class USPS(Dataset):
    def __init__(self, n, seed, transform):
        rng = np.random.RandomState(seed)
        self.train_labels = rng.randint(0, 10, n)
        self.train_data = draw_digits(self.train_labels, rng, 0.85)[:, None]
        self.train_data *= 255.0
        self.train_data = self.train_data.transpose((0, 2, 3, 1))
        self.transform = transform

    def __len__(self):
        return len(self.train_labels)

    def __getitem__(self, i):
        return self.transform(self.train_data[i]), int(self.train_labels[i])


def get_data_loader(name, train=True):
    seed = {"MNIST": 1, "USPS": 2}[name] + (0 if train else 10)
    dataset = (MNIST if name == "MNIST" else USPS)(1000 if train else 500, seed, pre_process)
    return DataLoader(dataset, batch_size=params.batch_size, shuffle=True)


class LeNetEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.ReLU(),
                                     nn.Conv2d(20, 50, 5), nn.Dropout2d(), nn.MaxPool2d(2), nn.ReLU())
        self.fc1 = nn.Linear(50 * 4 * 4, 500)

    def forward(self, x):
        return self.fc1(self.encoder(x).view(-1, 50 * 4 * 4))


class LeNetClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc2 = nn.Linear(500, 10)

    def forward(self, feat):
        return self.fc2(F.dropout(F.relu(feat), training=self.training))


class Discriminator(nn.Module):
    def __init__(self, input_dims=500, hidden_dims=500, output_dims=2):
        super().__init__()
        self.layer = nn.Sequential(nn.Linear(input_dims, hidden_dims), nn.ReLU(),
                                   nn.Linear(hidden_dims, hidden_dims), nn.ReLU(), nn.Linear(hidden_dims, output_dims))

    def forward(self, x):
        return self.layer(x)


def train_src(encoder, classifier, data_loader):
    encoder.train()
    classifier.train()
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(classifier.parameters()),
                                 lr=1e-3, betas=(params.beta1, params.beta2))
    criterion = nn.CrossEntropyLoss()
    for epoch in range(params.num_epochs_pre):
        for step, (images, labels) in enumerate(data_loader):
            optimizer.zero_grad()
            loss = criterion(classifier(encoder(images)), labels)
            loss.backward()
            optimizer.step()
        print(f"pretrain epoch {epoch + 1} loss={loss.item():.4f}")
    return encoder, classifier


def train_tgt(src_encoder, tgt_encoder, critic, src_data_loader, tgt_data_loader):
    tgt_encoder.train()
    critic.train()
    criterion = nn.CrossEntropyLoss()
    optimizer_tgt = torch.optim.Adam(tgt_encoder.parameters(), lr=params.c_learning_rate,
                                     betas=(params.beta1, params.beta2))
    optimizer_critic = torch.optim.Adam(critic.parameters(), lr=params.d_learning_rate,
                                        betas=(params.beta1, params.beta2))
    for epoch in range(params.num_epochs):
        for step, ((images_src, _), (images_tgt, _)) in enumerate(zip(src_data_loader, tgt_data_loader)):
            optimizer_critic.zero_grad()
            feat_concat = torch.cat((src_encoder(images_src), tgt_encoder(images_tgt)), 0)
            pred_concat = critic(feat_concat.detach())
            label_concat = torch.cat((torch.ones(len(images_src)), torch.zeros(len(images_tgt)))).long()
            loss_critic = criterion(pred_concat, label_concat)
            loss_critic.backward()
            optimizer_critic.step()
            acc = (pred_concat.argmax(1) == label_concat).float().mean()

            optimizer_critic.zero_grad()
            optimizer_tgt.zero_grad()
            pred_tgt = critic(tgt_encoder(images_tgt))
            loss_tgt = criterion(pred_tgt, torch.ones(len(images_tgt)).long())
            loss_tgt.backward()
            optimizer_tgt.step()
        print(f"adapt epoch {epoch + 1} d_loss={loss_critic.item():.4f} g_loss={loss_tgt.item():.4f} acc={acc.item():.3f}")
    return tgt_encoder


def eval_tgt(encoder, classifier, data_loader):
    encoder.eval()
    classifier.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in data_loader:
            correct += (classifier(encoder(images)).argmax(1) == labels).sum().item()
    print(f"Avg Accuracy = {100.0 * correct / len(data_loader.dataset):.2f}%")


def main():
    torch.manual_seed(0)
    src_data_loader, src_data_loader_eval = get_data_loader("MNIST"), get_data_loader("MNIST", train=False)
    tgt_data_loader, tgt_data_loader_eval = get_data_loader("USPS"), get_data_loader("USPS", train=False)
    src_encoder, src_classifier = LeNetEncoder(), LeNetClassifier()
    tgt_encoder, critic = LeNetEncoder(), Discriminator()
    src_encoder, src_classifier = train_src(src_encoder, src_classifier, src_data_loader)
    print(">>> source domain <<<")
    eval_tgt(src_encoder, src_classifier, src_data_loader_eval)
    tgt_encoder.load_state_dict(src_encoder.state_dict())
    tgt_encoder = train_tgt(src_encoder, tgt_encoder, critic, src_data_loader, tgt_data_loader)
    print(">>> source only <<<")
    eval_tgt(src_encoder, src_classifier, tgt_data_loader_eval)
    print(">>> domain adaption <<<")
    eval_tgt(tgt_encoder, src_classifier, tgt_data_loader_eval)


if __name__ == "__main__":
    main()
