"""A small generator trained to produce samples that a frozen, pretrained classifier assigns to a
requested class, plus a smoothness penalty on the samples. The helper guidance_loss(classifier,
samples, labels) scores the samples with grad enabled; the classifier stays frozen because its
parameters require no grad and are in no optimizer, and the class term trains the generator."""
import torch
import torch.nn.functional as F
from torch import nn

LATENT, DIM, CLASSES = 8, 24, 4


def make_classifier():
    torch.manual_seed(1)
    classifier = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    classifier.eval()
    for p in classifier.parameters():
        p.requires_grad_(False)
    return classifier


def guidance_loss(classifier, samples, labels):
    logits = classifier(samples)
    return F.cross_entropy(logits, labels)


def smoothness(samples):
    return (samples[:, 1:] - samples[:, :-1]).pow(2).mean()


def train(generator, classifier, steps=80, batch=32):
    optimizer = torch.optim.Adam(generator.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        z = torch.randn(batch, LATENT, generator=g)
        labels = torch.randint(0, CLASSES, (batch,), generator=g)
        samples = generator(torch.cat([z, F.one_hot(labels, CLASSES).float()], 1))
        class_term = guidance_loss(classifier, samples, labels)
        loss = class_term + 0.1 * smoothness(samples)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} class term {class_term.item():.4f}")


def main():
    classifier = make_classifier()
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(LATENT + CLASSES, 64), nn.ReLU(), nn.Linear(64, DIM))
    train(generator, classifier)


if __name__ == "__main__":
    main()
