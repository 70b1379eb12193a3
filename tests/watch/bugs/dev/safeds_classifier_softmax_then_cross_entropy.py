"""A small tabular deep-learning API in the style of a data-science library: the user lists
ForwardLayer objects, NeuralNetworkClassifier builds an internal nn.Module from them (ReLU after
every layer, the last layer's activation swapped for the task) and its fit() runs SGD with
nn.CrossEntropyLoss over a DataLoader made by an input-conversion object (one-hot float targets).

For more than two classes the builder gives the last layer a Softmax activation, so the network
already returns probabilities and CrossEntropyLoss applies its own log-softmax on top of them: the
scores it sees are squeezed into [0, 1], the loss cannot fall below about 1.27 for eight classes,
and the gradients shrink, so the classifier learns slowly and stays far less confident/accurate
than the same layers trained on logits.

Thread: https://github.com/Safe-DS/Library/issues/581
"""
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class _InternalLayer(nn.Module):
    def __init__(self, input_size, output_size, activation_function):
        super().__init__()
        self._layer = nn.Linear(input_size, output_size)
        if activation_function == "sigmoid":
            self._fn = nn.Sigmoid()
        elif activation_function == "relu":
            self._fn = nn.ReLU()
        elif activation_function == "softmax":
            self._fn = nn.Softmax(dim=1)
        else:
            raise ValueError("Unknown Activation Function: " + activation_function)

    def forward(self, x):
        return self._fn(self._layer(x))


class ForwardLayer:
    def __init__(self, output_size, input_size=None):
        self._input_size = input_size
        self._output_size = output_size

    def _set_input_size(self, input_size):
        self._input_size = input_size

    def _get_internal_layer(self, activation_function):
        return _InternalLayer(self._input_size, self._output_size, activation_function)

    @property
    def input_size(self):
        return self._input_size

    @property
    def output_size(self):
        return self._output_size


class _TableDataset(Dataset):
    def __init__(self, features, target):
        self.X = features.to(torch.float32)
        self.Y = target.to(torch.float32)

    def __getitem__(self, item):
        return self.X[item], self.Y[item]

    def __len__(self):
        return self.X.size(0)


class InputConversionTable:
    def __init__(self, feature_names, target_name):
        self._feature_names = feature_names
        self._target_name = target_name

    @property
    def _data_size(self):
        return len(self._feature_names)

    def _data_conversion_fit(self, table, batch_size, num_of_classes=1):
        x = torch.stack([table[name] for name in self._feature_names], dim=1)
        y = table[self._target_name]
        if num_of_classes <= 2:
            target = y.float().unsqueeze(dim=-1)
        else:
            target = nn.functional.one_hot(y.long(), num_classes=num_of_classes)
        return DataLoader(_TableDataset(x, target), batch_size=batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(0))

    def _data_conversion_predict(self, table, batch_size):
        x = torch.stack([table[name] for name in self._feature_names], dim=1)
        return DataLoader(x, batch_size=batch_size)


class _InternalModel(nn.Module):
    def __init__(self, layers, is_for_classification):
        super().__init__()
        self._layer_list = layers
        internal_layers = []
        previous_output_size = None
        for layer in layers:
            if previous_output_size is not None:
                layer._set_input_size(previous_output_size)
            internal_layers.append(layer._get_internal_layer(activation_function="relu"))
            previous_output_size = layer.output_size
        if is_for_classification:
            internal_layers.pop()
            if layers[-1].output_size > 2:
                internal_layers.append(layers[-1]._get_internal_layer(activation_function="softmax"))
            else:
                internal_layers.append(layers[-1]._get_internal_layer(activation_function="sigmoid"))
        self._pytorch_layers = nn.Sequential(*internal_layers)

    @property
    def input_size(self):
        return self._layer_list[0].input_size

    def forward(self, x):
        for layer in self._pytorch_layers:
            x = layer(x)
        return x


class NeuralNetworkClassifier:
    def __init__(self, input_conversion, layers):
        self._input_conversion = input_conversion
        self._model = _InternalModel(layers, is_for_classification=True)
        self._input_size = self._model.input_size
        self._batch_size = 1
        self._is_fitted = False
        self._num_of_classes = layers[-1].output_size
        self._total_number_of_batches_done = 0
        self._total_number_of_epochs_done = 0

    def fit(self, train_data, epoch_size=25, batch_size=1, learning_rate=0.001,
            callback_on_epoch_completion=None):
        copied_model = copy.deepcopy(self)
        copied_model._batch_size = batch_size
        dataloader = copied_model._input_conversion._data_conversion_fit(
            train_data, copied_model._batch_size, copied_model._num_of_classes)
        if copied_model._num_of_classes > 1:
            loss_fn = nn.CrossEntropyLoss()
        else:
            loss_fn = nn.BCELoss()
        optimizer = torch.optim.SGD(copied_model._model.parameters(), lr=learning_rate)
        for _ in range(epoch_size):
            loss_sum = 0.0
            amount_of_loss_values_calculated = 0
            for x, y in iter(dataloader):
                optimizer.zero_grad()
                pred = copied_model._model(x)
                loss = loss_fn(pred, y)
                loss_sum += loss.item()
                amount_of_loss_values_calculated += 1
                loss.backward()
                optimizer.step()
                copied_model._total_number_of_batches_done += 1
            copied_model._total_number_of_epochs_done += 1
            if callback_on_epoch_completion is not None:
                callback_on_epoch_completion(copied_model._total_number_of_epochs_done,
                                             loss_sum / amount_of_loss_values_calculated)
        copied_model._is_fitted = True
        copied_model._model.eval()
        return copied_model

    def predict(self, test_data):
        dataloader = self._input_conversion._data_conversion_predict(test_data, self._batch_size)
        predictions = []
        with torch.no_grad():
            for x in dataloader:
                predictions.append(torch.argmax(self._model(x), dim=1))
        return torch.cat(predictions, dim=0)


def make_table(n, seed, num_classes=8):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(num_classes, 6, generator=torch.Generator().manual_seed(42)) * 1.2
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = centers[y] + 0.8 * torch.randn(n, 6, generator=g)
    table = {f"f{i}": x[:, i] for i in range(6)}
    table["species"] = y
    return table


def main():
    torch.manual_seed(0)
    features = [f"f{i}" for i in range(6)]
    classifier = NeuralNetworkClassifier(
        InputConversionTable(features, "species"),
        [ForwardLayer(input_size=6, output_size=32), ForwardLayer(output_size=8)],
    )
    fitted = classifier.fit(
        make_table(1024, seed=0), epoch_size=4, batch_size=16, learning_rate=0.05,
        callback_on_epoch_completion=lambda e, l: print(f"epoch {e} mean loss {l:.4f}"),
    )
    test = make_table(512, seed=1)
    acc = (fitted.predict(test) == test["species"]).float().mean().item()
    print(f"test accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
