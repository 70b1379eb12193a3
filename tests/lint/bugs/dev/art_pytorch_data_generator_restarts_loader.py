"""
Shape: a library-style data generator layer: an abstract DataGenerator(size, batch_size) with get_batch(), a
PyTorchDataGenerator subclass that stores a torch DataLoader and converts each batch to numpy, and an adversarial
trainer class whose fit_generator(generator, nb_epochs) runs nb_epochs x (size // batch_size) steps, each taking
generator.get_batch(), mixing in attack-generated samples and calling classifier.fit(x, y, nb_epochs=1); the user's
script wraps a CIFAR-10 DataLoader built with shuffle=False, an ART PyTorchClassifier (SGD, CrossEntropyLoss) and a
PGD attack.
Bug: get_batch builds a fresh iterator from the DataLoader on every call and takes its first element, so with the
unshuffled loader every training step of every epoch fits the same first 32 images.
Thread: https://github.com/Trusted-AI/adversarial-robustness-toolbox/issues/728
"""
import abc

import numpy as np
import torch
import torchvision.transforms as transforms
from art.attacks.evasion import ProjectedGradientDescent
from art.estimators.classification import PyTorchClassifier
from torch.utils.data import DataLoader
from torchvision.datasets import CIFAR10


class DataGenerator(abc.ABC):
    def __init__(self, size, batch_size):
        if size is not None and size < 1:
            raise ValueError("size must be positive")
        self.size = size
        self.batch_size = batch_size
        self._source = None

    @abc.abstractmethod
    def get_batch(self):
        raise NotImplementedError

    @property
    def iterator(self):
        return self._source


class PyTorchDataGenerator(DataGenerator):
    def __init__(self, loader, size, batch_size):
        super().__init__(size=size, batch_size=batch_size)
        self._source = loader

    def get_batch(self):
        parts = list(next(iter(self.iterator)))
        for k, part in enumerate(parts):
            parts[k] = part.data.cpu().numpy()
        return tuple(parts)


class MixedAdversarialTrainer:
    def __init__(self, classifier, attack, ratio=0.5):
        self.classifier = classifier
        self.attack = attack
        self.ratio = ratio

    def fit_generator(self, generator, nb_epochs=20):
        steps = int(np.ceil(generator.size / generator.batch_size))
        for _ in range(nb_epochs):
            for _ in range(steps):
                x_b, y_b = generator.get_batch()
                n_adv = int(np.ceil(self.ratio * x_b.shape[0]))
                pick = np.random.choice(x_b.shape[0], size=n_adv, replace=False)
                x_b = x_b.copy()
                x_b[pick] = self.attack.generate(x_b[pick], y=y_b[pick])
                self.classifier.fit(x_b, y_b, nb_epochs=1, batch_size=x_b.shape[0], verbose=0)


def build_classifier():
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 10),
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    return PyTorchClassifier(model=net, loss=torch.nn.CrossEntropyLoss(), optimizer=opt,
                             input_shape=(3, 32, 32), nb_classes=10, clip_values=(0.0, 1.0))


if __name__ == "__main__":
    images = CIFAR10("./cifar", download=True, train=True, transform=transforms.ToTensor())
    loader = DataLoader(images, batch_size=32, shuffle=False)
    gen = PyTorchDataGenerator(loader, size=len(images), batch_size=32)
    clf = build_classifier()
    pgd = ProjectedGradientDescent(clf, eps=8 / 255, eps_step=2 / 255, max_iter=7)
    MixedAdversarialTrainer(clf, pgd, ratio=0.5).fit_generator(gen, nb_epochs=10)
