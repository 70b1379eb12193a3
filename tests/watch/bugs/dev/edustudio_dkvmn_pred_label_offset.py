"""A DKVMN knowledge-tracing model in the style of an education toolkit: a model class with
build_model(), forward(exer_seq, label_seq), predict() and get_main_loss(), driven by a training
template class that runs epochs of Adam and reports AUC on a held-out split. forward() reads the
value memory as it stood before interaction t (read on Mv[:, :-1]) with the key of question t, so
its output at t is already the prediction for the answer at t. The loss and predict() still shift
as DKT does, pairing y_pd[:, :-1] with label_seq[:, 1:]: the prediction for question t is scored
against the answer to question t+1, so the model is trained on the wrong target and its AUC stays
low.

Thread: https://github.com/HFUT-LEC/EduStudio/pull/16
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

N_ITEM, SEQ = 60, 30


def auc_score(labels, scores):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1)


class DKVMN(nn.Module):
    default_cfg = {"dim_s": 32, "size_m": 16, "drop_out": 0.2}

    def __init__(self, n_item):
        super().__init__()
        self.n_item, self.cfg = n_item, dict(self.default_cfg)
        self.build_model()
        nn.init.kaiming_normal_(self.Mk)
        nn.init.kaiming_normal_(self.Mv0)

    def build_model(self):
        d, m = self.cfg["dim_s"], self.cfg["size_m"]
        self.k_emb_layer = nn.Embedding(self.n_item, d)
        self.Mk = nn.Parameter(torch.empty(m, d))
        self.Mv0 = nn.Parameter(torch.empty(m, d))
        self.v_emb_layer = nn.Embedding(self.n_item * 2, d)
        self.f_layer = nn.Linear(d * 2, d)
        self.dropout_layer = nn.Dropout(self.cfg["drop_out"])
        self.p_layer = nn.Linear(d, 1)
        self.e_layer, self.a_layer = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, exer_seq, label_seq, **kwargs):
        k = self.k_emb_layer(exer_seq)
        v = self.v_emb_layer(exer_seq + self.n_item * label_seq)
        w = torch.softmax(k @ self.Mk.t(), dim=-1)
        erase, add = torch.sigmoid(self.e_layer(v)), torch.tanh(self.a_layer(v))
        Mvt = self.Mv0.unsqueeze(0).expand(exer_seq.shape[0], -1, -1)
        Mv = [Mvt]
        for et, at, wt in zip(erase.unbind(1), add.unbind(1), w.unbind(1)):
            Mvt = Mvt * (1 - wt.unsqueeze(-1) * et.unsqueeze(1)) + wt.unsqueeze(-1) * at.unsqueeze(1)
            Mv.append(Mvt)
        Mv = torch.stack(Mv, dim=1)
        read = (w.unsqueeze(-1) * Mv[:, :-1]).sum(-2)
        f = torch.tanh(self.f_layer(torch.cat([read, k], dim=-1)))
        return torch.sigmoid(self.p_layer(self.dropout_layer(f))).squeeze(-1)

    @torch.no_grad()
    def predict(self, **kwargs):
        y_pd = self(**kwargs)[:, :-1]
        keep = kwargs["mask_seq"][:, 1:] == 1
        return {"y_pd": y_pd[keep], "y_gt": kwargs["label_seq"][:, 1:][keep]}

    def get_main_loss(self, **kwargs):
        y_pd = self(**kwargs)[:, :-1]
        keep = kwargs["mask_seq"][:, 1:] == 1
        y_gt = kwargs["label_seq"][:, 1:][keep]
        return {"loss_main": F.binary_cross_entropy(input=y_pd[keep], target=y_gt.float())}


class TrainTPL:
    def __init__(self, model, lr=0.003, epochs=4, batch_size=32, seed=0):
        self.model, self.epochs, self.batch_size = model, epochs, batch_size
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.g = torch.Generator().manual_seed(seed)

    def batches(self, data, shuffle):
        n = len(data["exer_seq"])
        order = torch.randperm(n, generator=self.g) if shuffle else torch.arange(n)
        for s in range(0, n, self.batch_size):
            yield {k: v[order[s:s + self.batch_size]] for k, v in data.items()}

    def start(self, train, valid):
        for epoch in range(self.epochs):
            self.model.train()
            losses = []
            for batch in self.batches(train, shuffle=True):
                loss = self.model.get_main_loss(**batch)["loss_main"]
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                losses.append(loss.item())
            self.model.eval()
            outs = [self.model.predict(**b) for b in self.batches(valid, shuffle=False)]
            y_pd = torch.cat([o["y_pd"] for o in outs]).numpy()
            y_gt = torch.cat([o["y_gt"] for o in outs]).numpy()
            print(f"epoch {epoch} loss {np.mean(losses):.4f} valid auc {auc_score(y_gt, y_pd):.4f}")


def make_split(n, g, concept, difficulty):
    ability = torch.randn(n, 5, generator=g)
    exer = torch.randint(0, N_ITEM, (n, SEQ), generator=g)
    p = torch.sigmoid(2.0 * (ability.gather(1, concept[exer]) - difficulty[exer]))
    label = (torch.rand(n, SEQ, generator=g) < p).long()
    lengths = torch.randint(SEQ // 2, SEQ + 1, (n, 1), generator=g)
    mask = (torch.arange(SEQ).unsqueeze(0) < lengths).long()
    return {"exer_seq": exer * mask, "label_seq": label * mask, "mask_seq": mask}


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    concept = torch.randint(0, 5, (N_ITEM,), generator=g)
    difficulty = 0.5 * torch.randn(N_ITEM, generator=g)
    train, valid = make_split(640, g, concept, difficulty), make_split(200, g, concept, difficulty)
    TrainTPL(DKVMN(N_ITEM)).start(train, valid)


if __name__ == "__main__":
    main()
