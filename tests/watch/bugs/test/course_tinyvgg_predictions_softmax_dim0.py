"""A course-notebook computer-vision workflow: a TinyVGG-style FashionModelV2 (two conv blocks and a
linear classifier), helper functions train_step(model, data_loader, loss_fn, optimizer,
accuracy_fn, device) and test_step(...) called once per epoch from a loop, eval_model(...) that
reports loss and accuracy on the test loader, and a final "make predictions" cell that collects
predicted labels over the test loader under inference_mode to build a confusion matrix and report
the accuracy of those predictions.

Bug: the prediction cell turns each batch of logits (batch, classes) into probabilities with
torch.softmax(y_logit.squeeze(), dim=0), normalizing every class column over the samples of the
batch instead of each sample over the classes, and then takes argmax(dim=1). The labels that feed
the confusion matrix (and the accuracy computed from them) depend on which other images share the
batch and come out lower than what eval_model reports for the same model. The course author
confirmed that dim=1 is the correct choice and posted the corrected cell.

Thread: https://github.com/mrdbourke/pytorch-deep-learning/issues/163
"""
import torch
from torch import nn

device = "cpu"
BATCH_SIZE = 32


def accuracy_fn(y_true, y_pred):
    correct = torch.eq(y_true, y_pred).sum().item()
    return (correct / len(y_pred)) * 100


class FashionModelV2(nn.Module):
    def __init__(self, input_shape, hidden_units, output_shape):
        super().__init__()
        self.block_1 = nn.Sequential(
            nn.Conv2d(input_shape, hidden_units, 3, padding=1), nn.ReLU(),
            nn.Conv2d(hidden_units, hidden_units, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2))
        self.block_2 = nn.Sequential(
            nn.Conv2d(hidden_units, hidden_units, 3, padding=1), nn.ReLU(),
            nn.Conv2d(hidden_units, hidden_units, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(hidden_units * 4 * 4, output_shape))

    def forward(self, x):
        return self.classifier(self.block_2(self.block_1(x)))


def train_step(model, data_loader, loss_fn, optimizer, accuracy_fn, device=device):
    train_loss, train_acc = 0, 0
    model.train()
    for X, y in data_loader:
        X, y = X.to(device), y.to(device)
        y_pred = model(X)
        loss = loss_fn(y_pred, y)
        train_loss += loss
        train_acc += accuracy_fn(y_true=y, y_pred=y_pred.argmax(dim=1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    train_loss /= len(data_loader)
    train_acc /= len(data_loader)
    print(f"Train loss: {train_loss:.5f} | Train accuracy: {train_acc:.2f}%")


def test_step(model, data_loader, loss_fn, accuracy_fn, device=device):
    test_loss, test_acc = 0, 0
    model.eval()
    with torch.inference_mode():
        for X, y in data_loader:
            X, y = X.to(device), y.to(device)
            test_pred = model(X)
            test_loss += loss_fn(test_pred, y)
            test_acc += accuracy_fn(y_true=y, y_pred=test_pred.argmax(dim=1))
        test_loss /= len(data_loader)
        test_acc /= len(data_loader)
    print(f"Test loss: {test_loss:.5f} | Test accuracy: {test_acc:.2f}%")


def eval_model(model, data_loader, loss_fn, accuracy_fn):
    loss, acc = 0, 0
    model.eval()
    with torch.inference_mode():
        for X, y in data_loader:
            y_pred = model(X)
            loss += loss_fn(y_pred, y)
            acc += accuracy_fn(y_true=y, y_pred=y_pred.argmax(dim=1))
        loss /= len(data_loader)
        acc /= len(data_loader)
    return {"model_name": model.__class__.__name__, "model_loss": loss.item(), "model_acc": acc}


def make_images(n, seed):
    """16x16 grayscale images of ten stroke patterns with jitter and noise."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 1, 16, 16, generator=torch.Generator().manual_seed(123))
    protos = nn.functional.avg_pool2d(protos, 3, 1, 1) * 3
    y = torch.randint(0, 10, (n,), generator=g)
    X = protos[y] + 2.2 * torch.randn(n, 1, 16, 16, generator=g)
    shifts = torch.randint(-1, 2, (n, 2), generator=g)
    X = torch.stack([torch.roll(x, tuple(s.tolist()), dims=(1, 2)) for x, s in zip(X, shifts)])
    return X, y


def confusion_matrix(preds, target, num_classes):
    cm = torch.zeros(num_classes, num_classes, dtype=torch.long)
    for t, p in zip(target, preds):
        cm[t, p] += 1
    return cm


def main():
    torch.manual_seed(42)
    X_train, y_train = make_images(1600, 0)
    X_test, y_test = make_images(480, 1)
    train_dataloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X_train, y_train),
                                                   batch_size=BATCH_SIZE, shuffle=True)
    test_dataloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X_test, y_test),
                                                  batch_size=BATCH_SIZE, shuffle=False)
    model_2 = FashionModelV2(input_shape=1, hidden_units=8, output_shape=10).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(params=model_2.parameters(), lr=0.1)

    epochs = 3
    for epoch in range(epochs):
        print(f"Epoch: {epoch}\n---------")
        train_step(model_2, train_dataloader, loss_fn, optimizer, accuracy_fn, device)
        test_step(model_2, test_dataloader, loss_fn, accuracy_fn, device)

    model_2_results = eval_model(model_2, test_dataloader, loss_fn, accuracy_fn)
    print(model_2_results)

    # Make predictions with the trained model for the confusion matrix
    y_preds = []
    model_2.eval()
    with torch.inference_mode():
        for X, y in test_dataloader:
            X, y = X.to(device), y.to(device)
            y_logit = model_2(X)
            y_pred = torch.softmax(y_logit.squeeze(), dim=0).argmax(dim=1)
            y_preds.append(y_pred.cpu())
    y_pred_tensor = torch.cat(y_preds)

    cm = confusion_matrix(y_pred_tensor, y_test, 10)
    print("confusion matrix:\n", cm)
    print(f"accuracy of the predictions: {accuracy_fn(y_test, y_pred_tensor):.2f}%")


if __name__ == "__main__":
    main()
