"""
Shape: a generic Brain-style trainer class: __init__ takes a dict of modules, an opt_class factory and run options
(auto_mix_prec, max_grad_norm, nonfinite_patience) and creates torch.cuda.amp.GradScaler when mixed precision is
on; init_optimizers builds the optimizer from opt_class; fit_batch has an AMP branch (autocast, scaler.scale(loss)
.backward(), then a guard method, scaler.step, zero_grad, scaler.update) and an fp32 branch; the guard method
check_gradients(loss) handles non-finite losses and clips the gradient norm of all module parameters; fit() loops
over epochs and batches calling fit_batch; a recipe subclass supplies compute_forward and compute_objectives.
Bug: in the AMP branch the gradients are still multiplied by the loss scale when check_gradients runs
clip_grad_norm_, because scaler.unscale_(optimizer) is never called before it, so the clip threshold is compared
with scaled gradients and the update is shrunk by the scale factor.
Thread: https://github.com/speechbrain/speechbrain/pull/615
"""
import logging

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)


class Trainer:
    def __init__(self, modules, opt_class=None, run_opts=None):
        opts = {"auto_mix_prec": False, "max_grad_norm": 5.0, "nonfinite_patience": 3, "device": "cpu"}
        if run_opts:
            opts.update(run_opts)
        for key, val in opts.items():
            setattr(self, key, val)
        self.modules = torch.nn.ModuleDict(modules).to(self.device)
        self.opt_class = opt_class
        self.bad_steps = 0
        if self.auto_mix_prec:
            self.scaler = torch.cuda.amp.GradScaler()

    def init_optimizers(self):
        if self.opt_class is not None:
            self.optimizer = self.opt_class(self.modules.parameters())

    def compute_forward(self, batch, stage):
        raise NotImplementedError

    def compute_objectives(self, outputs, batch, stage):
        raise NotImplementedError

    def fit_batch(self, batch):
        if self.auto_mix_prec:
            with torch.cuda.amp.autocast():
                outputs = self.compute_forward(batch, "train")
                loss = self.compute_objectives(outputs, batch, "train")
                self.scaler.scale(loss).backward()
                if self.check_gradients(loss):
                    self.scaler.step(self.optimizer)
                self.optimizer.zero_grad()
                self.scaler.update()
        else:
            outputs = self.compute_forward(batch, "train")
            loss = self.compute_objectives(outputs, batch, "train")
            loss.backward()
            if self.check_gradients(loss):
                self.optimizer.step()
            self.optimizer.zero_grad()
        return loss.detach().cpu()

    def check_gradients(self, loss):
        if not torch.isfinite(loss):
            self.bad_steps += 1
            log.warning(f"non-finite loss {loss}")
            if self.bad_steps > self.nonfinite_patience:
                raise ValueError("loss kept being non-finite")
            return False
        torch.nn.utils.clip_grad_norm_((p for p in self.modules.parameters()), self.max_grad_norm)
        return True

    def evaluate_batch(self, batch):
        with torch.no_grad():
            out = self.compute_forward(batch, "valid")
            return self.compute_objectives(out, batch, "valid").detach().cpu()

    def fit(self, epochs, train_set, valid_set=None):
        self.init_optimizers()
        for epoch in range(epochs):
            self.modules.train()
            self.bad_steps = 0
            total = 0.0
            for step, batch in enumerate(train_set, 1):
                total += float(self.fit_batch(batch))
            log.info(f"epoch {epoch} train loss {total / max(step, 1):.4f}")
            if valid_set is not None:
                self.modules.eval()
                val = sum(float(self.evaluate_batch(b)) for b in valid_set)
                log.info(f"epoch {epoch} valid loss {val:.4f}")


class SpeakerIdBrain(Trainer):
    def compute_forward(self, batch, stage):
        feats, _ = batch
        feats = feats.to(self.device)
        emb = self.modules.encoder(feats)
        return self.modules.classifier(emb)

    def compute_objectives(self, outputs, batch, stage):
        _, labels = batch
        return F.cross_entropy(outputs, labels.to(self.device))


if __name__ == "__main__":
    from recipe_modules import SmallTDNN, train_loader, valid_loader

    enc = SmallTDNN(in_dim=40, emb_dim=128)
    head = torch.nn.Linear(128, 10)
    brain = SpeakerIdBrain(
        {"encoder": enc, "classifier": head},
        opt_class=lambda params: torch.optim.Adam(params, lr=1e-3),
        run_opts={"auto_mix_prec": True, "device": "cuda"},
    )
    brain.fit(10, train_loader, valid_loader)
