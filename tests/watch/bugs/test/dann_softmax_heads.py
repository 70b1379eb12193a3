"""A domain-adversarial (DANN) setup with an Extractor, a label Classifier and a domain Discriminator
behind a gradient-reversal layer, trained by a train(encoder, classifier, discriminator, source,
target) function with one SGD over all three; both heads end in nn.Softmax and both losses are
CrossEntropyLoss, so both are doubly normalised and the label head learns slowly.

Thread: https://github.com/NaJaeMin92/pytorch-DANN/issues/7
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ReverseLayerF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class Extractor(nn.Module):
    def __init__(self):
        super().__init__()
        self.extractor = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())

    def forward(self, x):
        return self.extractor(x)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10), nn.Softmax(dim=1))

    def forward(self, x):
        return self.classifier(x)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.discriminator = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2), nn.Softmax(dim=1))

    def forward(self, input_feature, alpha):
        return self.discriminator(ReverseLayerF.apply(input_feature, alpha))


def train(encoder, classifier, discriminator, source_loader, target_loader, epochs):
    classifier_criterion = nn.CrossEntropyLoss()
    discriminator_criterion = nn.CrossEntropyLoss()
    params = list(encoder.parameters()) + list(classifier.parameters()) + list(discriminator.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    for epoch in range(epochs):
        for (source_image, source_label), (target_image, _) in zip(source_loader, target_loader):
            alpha = 0.5
            combined_image = torch.cat((source_image, target_image), 0)
            optimizer.zero_grad()
            combined_feature = encoder(combined_image)
            source_feature = encoder(source_image)
            class_pred = classifier(source_feature)
            class_loss = classifier_criterion(class_pred, source_label)
            domain_pred = discriminator(combined_feature, alpha)
            domain_source_labels = torch.zeros(source_label.shape[0], dtype=torch.long)
            domain_target_labels = torch.ones(target_image.shape[0], dtype=torch.long)
            domain_combined_label = torch.cat((domain_source_labels, domain_target_labels), 0)
            domain_loss = discriminator_criterion(domain_pred, domain_combined_label)
            total_loss = class_loss + domain_loss
            total_loss.backward()
            optimizer.step()
        print(f"epoch {epoch} class loss {class_loss.item():.4f} domain loss {domain_loss.item():.4f}")


def digits(n, shift, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 48, generator=torch.Generator().manual_seed(5))
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(protos[y] + torch.randn(n, 48, generator=g) + shift, y)


def main():
    torch.manual_seed(0)
    mk = lambda ds: DataLoader(ds, batch_size=32, shuffle=True, drop_last=True,  # noqa: E731
                               generator=torch.Generator().manual_seed(0))
    train(Extractor(), Classifier(), Discriminator(), mk(digits(1024, 0.0, 0)), mk(digits(1024, 0.7, 1)),
          epochs=3)


if __name__ == "__main__":
    main()
