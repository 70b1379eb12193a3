"""The framework callbacks of `kb watch`: a Hugging Face Trainer and a Lightning Trainer own the
loop and the optimizer, and the callback still names the cause (probabilities fed to
cross_entropy) on the bug and nothing on the fixed twin. Each test runs only where its optional
framework is installed; the import error without it says how to install it."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def blobs(n=256, classes=4, dim=8, seed=0):
    """Four separable Gaussian blobs: a model that can learn gets far below chance quickly."""
    g = torch.Generator().manual_seed(seed)
    centers = 3 * torch.randn(classes, dim, generator=g)
    labels = torch.randint(0, classes, (n,), generator=g)
    return centers[labels] + torch.randn(n, dim, generator=g), labels


class Net(torch.nn.Module):
    def __init__(self, softmax_before_loss: bool):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        self.softmax_before_loss = softmax_before_loss

    def forward(self, x, labels=None):
        out = self.body(x)
        if self.softmax_before_loss:
            out = out.softmax(dim=-1)
        return {"loss": F.cross_entropy(out, labels), "logits": out} if labels is not None else {"logits": out}


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("bug", [True, False], ids=["bug", "fixed"])
def test_hugging_face_trainer_callback(tmp_path, one_thread, bug):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")  # the Trainer needs it
    from transformers import Trainer, TrainingArguments

    from kb_tools.watch.huggingface import WatchCallback
    x, y = blobs()
    data = [{"x": x[i], "labels": y[i]} for i in range(len(y))]
    torch.manual_seed(0)
    callback = WatchCallback(stream=io.StringIO())
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=30, per_device_train_batch_size=32,
                             learning_rate=1e-2, report_to=[], use_cpu=True, save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
    Trainer(model=Net(softmax_before_loss=bug), args=args, train_dataset=data, callbacks=[callback]).train()
    entries = [f["entry"] for f in callback.findings]
    if bug:
        assert entries and entries[0] == "double-softmax", callback.findings
        assert "KBW007 double-softmax" in callback.options["stream"].getvalue()  # the report was printed
    else:
        assert entries == [], callback.findings


class _LightningNet:
    """Built on first use: the LightningModule class needs lightning imported."""

    @staticmethod
    def make(softmax_before_loss: bool):
        import lightning.pytorch as pl

        class Classifier(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = Net(softmax_before_loss)

            def training_step(self, batch, batch_idx):
                x, y = batch
                return self.net(x, y)["loss"]

            def configure_optimizers(self):
                return torch.optim.Adam(self.parameters(), lr=1e-2)
        return Classifier()


@pytest.mark.parametrize("bug", [True, False], ids=["bug", "fixed"])
def test_lightning_trainer_callback(one_thread, tmp_path, bug):
    pytest.importorskip("lightning")
    import lightning.pytorch as pl

    from kb_tools.watch.lightning import WatchCallback
    x, y = blobs()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
    torch.manual_seed(0)
    callback = WatchCallback(stream=io.StringIO())
    trainer = pl.Trainer(max_steps=30, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path),
                         callbacks=[callback])
    trainer.fit(_LightningNet.make(bug), loader)
    entries = [f["entry"] for f in callback.findings]
    if bug:
        assert entries and entries[0] == "double-softmax", callback.findings
        assert "KBW007 double-softmax" in callback.options["stream"].getvalue()
    else:
        assert entries == [], callback.findings


@pytest.mark.parametrize("module, package", [("kb_tools.watch.huggingface", "transformers"),
                                             ("kb_tools.watch.lightning", "lightning")])
def test_without_the_framework_the_import_error_says_how_to_install_it(module, package):
    probe = (f"import sys\nsys.modules[{package!r}] = None\n"  # as if not installed
             f"sys.modules[{package + '.pytorch.callbacks'!r}] = None\n"
             f"try:\n    import {module}\nexcept ImportError as exc:\n    print(exc)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert f"python -m pip install {package}" in r.stdout, (r.stdout, r.stderr)
