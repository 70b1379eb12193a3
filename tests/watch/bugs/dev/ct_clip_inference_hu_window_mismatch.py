"""A CT-CLIP style contrastive trainer: CTReportDataset.nii_img_to_tensor() clips each chest CT
volume in Hounsfield units and scales it to [-1, 1], a CTCLIP module pairs a small 3D conv volume
encoder with a bag-of-tokens report encoder and a learned temperature, CTClipTrainer.train_step()
runs the symmetric InfoNCE loss with AdamW, and a zero-shot inference script builds
CTReportDatasetInfer and scores every pathology by comparing the volume embedding with the
"<pathology> is present" and "no <pathology>" prompts.
The bug: training windows the volumes to [-1000, 1000] HU, but the inference dataset was left at
the first iteration's window of [-1000, 200] HU, so at inference every volume is scaled
differently (and everything above 200 HU, bone and dense lesions, is flattened) relative to what
the encoder was trained on; the zero-shot numbers come out well below what the trained model gives
with the training preprocessing, without any error.

Thread: https://github.com/ibrahimethemhamamci/CT-CLIP/issues/36
"""
import torch
import torch.nn.functional as F
from torch import nn

PATHOLOGIES = ["calcification", "nodule", "effusion"]
VOCAB = ["<pad>", "no", "is", "present", "not", "evidence", "of", "seen"] + PATHOLOGIES


def tokenize(text, length=8):
    ids = [VOCAB.index(w) for w in text.split() if w in VOCAB][:length]
    return torch.tensor(ids + [0] * (length - len(ids)))


def synth_volume_hu(labels, g, size=(8, 16, 16)):
    """Soft tissue around 40 HU, lungs around -850 HU, and per pathology a dense or fluid blob."""
    d, h, w = size
    vol = torch.full(size, 40.0) + 30 * torch.randn(size, generator=g)
    vol[:, 3:13, 2:7] = -850 + 40 * torch.randn(d, 10, 5, generator=g)
    vol[:, 3:13, 9:14] = -850 + 40 * torch.randn(d, 10, 5, generator=g)
    if labels[0]:  # calcification: very dense, 500-900 HU
        z, y = torch.randint(1, d - 2, (1,), generator=g).item(), torch.randint(4, 11, (1,), generator=g).item()
        vol[z:z + 2, y:y + 2, 3:6] = 500 + 400 * torch.rand(1, generator=g).item()
    if labels[1]:  # nodule: soft-tissue density inside the lung, 250-400 HU core
        z, y = torch.randint(1, d - 3, (1,), generator=g).item(), torch.randint(4, 10, (1,), generator=g).item()
        vol[z:z + 3, y:y + 3, 10:13] = 250 + 150 * torch.rand(1, generator=g).item()
    if labels[2]:  # effusion: fluid at the lung base, 10-20 HU
        vol[:, 11:13, 2:14] = 15 + 5 * torch.randn(d, 2, 12, generator=g)
    return vol


def make_report(labels, g):
    parts = []
    for name, flag in zip(PATHOLOGIES, labels):
        if flag:
            parts.append(f"{name} is present")
        else:
            parts.append(f"no {name}")
    return " ".join(parts)


class CTReportDataset:
    """Training data: HU window [-1000, 1000] -> [-1, 1]."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = (torch.rand(n, len(PATHOLOGIES), generator=g) < 0.5).long()
        self.hu = [synth_volume_hu(lab.tolist(), g) for lab in self.labels]
        self.reports = [make_report(lab.tolist(), g) for lab in self.labels]

    def nii_img_to_tensor(self, hu):
        return (hu.clamp(-1000, 1000) / 1000.0).unsqueeze(0)

    def __len__(self):
        return len(self.hu)

    def __getitem__(self, i):
        return self.nii_img_to_tensor(self.hu[i]), tokenize(self.reports[i]), self.labels[i]


class CTReportDatasetInfer(CTReportDataset):
    """Inference data: still the first iteration's window [-1000, 200] -> [-1, 1]."""

    def nii_img_to_tensor(self, hu):
        return ((hu.clamp(-1000, 200) + 400.0) / 600.0).unsqueeze(0)


class CTCLIP(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.visual = nn.Sequential(
            nn.Conv3d(1, 16, 3, padding=1), nn.GELU(), nn.MaxPool3d(2),
            nn.Conv3d(16, 32, 3, padding=1), nn.GELU(), nn.AdaptiveMaxPool3d(1), nn.Flatten(),
            nn.Linear(32, dim))
        self.token_emb = nn.Embedding(len(VOCAB), dim, padding_idx=0)
        self.text_proj = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.logit_scale = nn.Parameter(torch.tensor(2.3))

    def encode_text(self, ids):
        e = self.token_emb(ids)
        mask = (ids != 0).float().unsqueeze(-1)
        mean = (e * mask).sum(1) / mask.sum(1).clamp(min=1)
        # bigram-ish feature so "not present" differs from "present"
        shifted = torch.cat([e[:, 1:], torch.zeros_like(e[:, :1])], 1)
        inter = (e * shifted * mask).sum(1)
        return F.normalize(self.text_proj(torch.cat([mean, inter], -1)), dim=-1)

    def encode_image(self, vol):
        return F.normalize(self.visual(vol), dim=-1)

    def forward(self, ids, vol):
        t, v = self.encode_text(ids), self.encode_image(vol)
        logits = self.logit_scale.exp() * v @ t.t()
        target = torch.arange(len(ids))
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target)) / 2


class CTClipTrainer:
    def __init__(self, model, dataset, batch_size=24, lr=3e-3, num_train_steps=80):
        self.model, self.ds, self.bs, self.steps = model, dataset, batch_size, num_train_steps
        self.optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        self.g = torch.Generator().manual_seed(1)

    def train_step(self, step):
        self.model.train()
        idx = torch.randperm(len(self.ds), generator=self.g)[: self.bs].tolist()
        vols, ids, _ = zip(*[self.ds[i] for i in idx])
        loss = self.model(torch.stack(ids), torch.stack(vols))
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()
        if step % 20 == 0:
            print(f"step {step} contrastive loss {loss.item():.4f}")

    def train(self):
        for step in range(self.steps):
            self.train_step(step)


@torch.no_grad()
def zero_shot(model, dataset):
    model.eval()
    correct = torch.zeros(len(PATHOLOGIES))
    for i in range(len(dataset)):
        vol, _, lab = dataset[i]
        v = model.encode_image(vol.unsqueeze(0))
        for k, name in enumerate(PATHOLOGIES):
            prompts = torch.stack([tokenize(f"{name} is present"), tokenize(f"no {name}")])
            sims = (v @ model.encode_text(prompts).t()).squeeze(0)
            pred = int(sims[0] > sims[1])
            correct[k] += float(pred == lab[k].item())
    return correct / len(dataset)


def main():
    torch.manual_seed(0)
    model = CTCLIP()
    trainer = CTClipTrainer(model, CTReportDataset(400, seed=0))
    trainer.train()
    infer_ds = CTReportDatasetInfer(120, seed=5)
    acc = zero_shot(model, infer_ds)
    for name, a in zip(PATHOLOGIES, acc.tolist()):
        print(f"zero-shot {name}: accuracy {a:.3f}")
    print(f"mean zero-shot accuracy {acc.mean().item():.3f}")


if __name__ == "__main__":
    main()
