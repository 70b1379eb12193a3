"""
Shape: library train(unimodal_encs, fuser, clf_head, tr_loader, va_loader, max_epochs, ..., OptCls, obj, ...) wraps an MMDL module (nn.ModuleList of unimodal_encs + fuser + clf_head) and runs a nested _trainprocess() closure: builds the optimizer from requires_grad params, per epoch mm_model.train() + batch loop (zero_grad, forward via _prep, apply_objective helper, backward, clip, step), then mm_model.eval() and a no_grad validation loop with a packed/unpacked branch.
Bug: inside the validation loop each branch calls mm_model.train() right before the forward pass, undoing mm_model.eval(), so validation runs with dropout/batch-norm in training mode.
Thread: https://github.com/pliang279/MultiBench/issues/26
"""
import torch
from torch import nn

from eval_scripts.complexity import all_in_one_train
from eval_scripts.performance import accuracy


class MMDL(nn.Module):
    def __init__(self, unimodal_encs, fuser, clf_head, padded=False):
        super().__init__()
        self.unimodal_encs = nn.ModuleList(unimodal_encs)
        self.fuse_mod = fuser
        self.clf_head = clf_head
        self.padded = padded
        self.fused_out = None
        self.unimodal_reps = []

    def forward(self, inputs):
        if self.padded:
            enc_outs = [self.unimodal_encs[k]([inputs[0][k], inputs[1][k]]) for k in range(len(inputs[0]))]
        else:
            enc_outs = [self.unimodal_encs[k](inputs[k]) for k in range(len(inputs))]
        self.unimodal_reps = enc_outs
        o = self.fuse_mod(enc_outs)
        self.fused_out = o
        if isinstance(o, tuple):
            o = o[0]
        return self.clf_head(o)


def apply_objective(obj, yhat, ytrue, args):
    dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if isinstance(obj, nn.CrossEntropyLoss):
        tgt = ytrue.squeeze(len(yhat.size()) - 1) if len(ytrue.size()) == len(yhat.size()) else ytrue
        return obj(yhat, tgt.long().to(dev))
    elif isinstance(obj, (nn.MSELoss, nn.BCEWithLogitsLoss, nn.L1Loss)):
        return obj(yhat, ytrue.float().to(dev))
    return obj(yhat, ytrue, args)


def train(unimodal_encs, fuser, clf_head, tr_loader, va_loader, max_epochs,
          extra_modules=[], packed=False, use_early_stop=False, task_kind="classification",
          OptCls=torch.optim.RMSprop, lr=0.001, weight_decay=0.0, obj=nn.CrossEntropyLoss(),
          ckpt_path='best.pt', obj_kwargs=None, cast_float=True, max_norm=8, profile_run=True):
    dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    mm_model = MMDL(unimodal_encs, fuser, clf_head, padded=packed).to(dev)

    def _trainprocess():
        extra = []
        for m in extra_modules:
            extra.extend([p for p in m.parameters() if p.requires_grad])
        opt = OptCls([p for p in mm_model.parameters() if p.requires_grad] + extra, lr=lr,
                       weight_decay=weight_decay)
        best_score = 0
        bad_epochs = 0

        def _prep(t):
            return t.float() if cast_float else t

        for ep in range(max_epochs):
            mm_model.train()
            for bt in tr_loader:
                opt.zero_grad()
                if packed:
                    o = mm_model([[_prep(i).to(dev) for i in bt[0]], bt[1]])
                else:
                    o = mm_model([_prep(i).to(dev) for i in bt[:-1]])
                loss = apply_objective(obj, o, bt[-1], obj_kwargs)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(mm_model.parameters(), max_norm)
                opt.step()

            mm_model.eval()
            with torch.inference_mode():
                hats, golds = [], []
                for bt in va_loader:
                    if packed:
                        mm_model.train()
                        o = mm_model([[_prep(i).to(dev) for i in bt[0]], bt[1]])
                    else:
                        mm_model.train()
                        o = mm_model([_prep(i).to(dev) for i in bt[:-1]])
                    if task_kind == "classification":
                        hats.append(torch.argmax(o, 1))
                    golds.append(bt[-1])
            score = accuracy(torch.cat(golds, 0), torch.cat(hats, 0))
            if score > best_score:
                best_score = score
                bad_epochs = 0
                torch.save(mm_model, ckpt_path)
            else:
                bad_epochs += 1
            if use_early_stop and bad_epochs > 7:
                break

    if profile_run:
        all_in_one_train(_trainprocess, [mm_model] + extra_modules)
    else:
        _trainprocess()
