"""A bottom-up pose (associative-embedding style) training setup: a task module keeps a __config__
dict ('inference' and 'train' sections), make_network(configs) wraps the pose net in a Trainer
nn.Module whose forward also returns the weighted loss terms while training, builds Adam and returns
a make_train(batch_id, config, phase, **inputs) closure; a driver loops over the phases 'train' and
'valid' every epoch and calls the closure on each batch. The closure never looks at the phase: every
'valid' batch goes through the forward in training mode and then through zero_grad, backward and
optimizer.step, so the network is fitted to the validation batches, the same ones every epoch, and
the validation loss it prints says nothing about unseen images.

Thread: https://github.com/princeton-vl/pose-ae-train/pull/12
"""
import torch
from torch import nn
import torch.nn.functional as F

__config__ = {
    'inference': {'nstack': 2, 'inp_dim': 24, 'oup_dim': 8, 'num_parts': 4, 'keys': ['imgs']},
    'train': {
        'batchsize': 8,
        'input_res': 32,
        'output_res': 16,
        'train_iters': 24,
        'valid_iters': 6,
        'epochs': 3,
        'learning_rate': 2e-3,
        'loss': [['tag_loss', 1e-2], ['detection_loss', 1.0]],
        'decay_at': 2000,
    },
}


def block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Stack(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.low = nn.Sequential(block(f, f, 2), block(f, f))
        self.skip = block(f, f)

    def forward(self, x):
        return self.skip(x) + F.interpolate(self.low(x), scale_factor=2.0, mode='nearest')


class PoseNet(nn.Module):
    """Each stack predicts num_parts detection heatmaps followed by num_parts tag maps."""

    def __init__(self, nstack, inp_dim, oup_dim, num_parts, **kw):
        super().__init__()
        self.num_parts = num_parts
        self.stem = nn.Sequential(block(3, inp_dim, 2), block(inp_dim, inp_dim))
        self.stacks = nn.ModuleList([Stack(inp_dim) for _ in range(nstack)])
        self.heads = nn.ModuleList([nn.Conv2d(inp_dim, oup_dim, 1) for _ in range(nstack)])
        self.back = nn.ModuleList([nn.Conv2d(oup_dim, inp_dim, 1) for _ in range(nstack - 1)])

    def forward(self, imgs):
        x = self.stem(imgs)
        outs = []
        for i, stack in enumerate(self.stacks):
            feat = stack(x)
            outs.append(self.heads[i](feat))
            if i < len(self.back):
                x = x + feat + self.back[i](outs[-1])
        return torch.stack(outs, 1)

    def calc_loss(self, preds, heatmaps, keypoints):
        det = preds[:, :, :self.num_parts]
        tags = preds[:, :, self.num_parts:]
        detection_loss = ((det - heatmaps[:, None]) ** 2).mean(dim=(2, 3, 4))
        b, s = preds.shape[:2]
        idx = keypoints[:, None, :, None].expand(b, s, self.num_parts, 1)
        flat = tags.flatten(3)
        picked = torch.gather(flat, 3, idx).squeeze(-1)
        ref = picked.mean(dim=2, keepdim=True)
        tag_loss = ((picked - ref) ** 2).mean(dim=2)
        return tag_loss, detection_loss


class Trainer(nn.Module):
    """Wrapper that returns predictions at inference and predictions plus losses while training."""

    def __init__(self, model, inference_keys, calc_loss):
        super().__init__()
        self.model = model
        self.keys = inference_keys
        self.calc_loss = calc_loss

    def forward(self, imgs, **inputs):
        labels = {k: v for k, v in inputs.items() if k not in self.keys}
        if not self.training:
            return self.model(imgs)
        preds = self.model(imgs)
        return [preds] + list(self.calc_loss(preds, **labels))


def make_network(configs):
    train_cfg, config = configs['train'], configs['inference']
    pose_net = PoseNet(**config)
    config['net'] = Trainer(pose_net, config['keys'], pose_net.calc_loss)
    train_cfg['optimizer'] = torch.optim.Adam(config['net'].parameters(), train_cfg['learning_rate'])

    def make_train(batch_id, config, phase, **inputs):
        net = config['inference']['net']
        config['batch_id'] = batch_id
        if phase != 'inference':
            result = net(inputs['imgs'], **{k: v for k, v in inputs.items() if k != 'imgs'})
            terms = config['train']['loss']
            losses = {name: result[1 + i] * weight for i, (name, weight) in enumerate(terms)}
            loss = sum(torch.mean(v) for v in losses.values())
            if batch_id == config['train']['decay_at']:
                for group in train_cfg['optimizer'].param_groups:
                    group['lr'] = 1e-5
            optimizer = train_cfg['optimizer']
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item()
        net = net.eval()
        return {'preds': net(**inputs)}

    return make_train


def make_data(config):
    tc, parts = config['train'], config['inference']['num_parts']
    res, ores = tc['input_res'], tc['output_res']
    yy, xx = torch.meshgrid(torch.arange(ores).float(), torch.arange(ores).float(), indexing='ij')
    colours = torch.rand(parts, 3, generator=torch.Generator().manual_seed(7)) + 0.3
    train_stream = torch.Generator().manual_seed(0)

    def batches(g):
        while True:
            b = tc['batchsize']
            kp = torch.randint(2, ores - 2, (b, parts, 2), generator=g).float()
            heat = torch.exp(-((xx - kp[..., 0, None, None]) ** 2 + (yy - kp[..., 1, None, None]) ** 2) / 2.0)
            big = F.interpolate(heat, size=(res, res), mode='bilinear', align_corners=False)
            imgs = torch.einsum('bphw,pc->bchw', big, colours) + 0.25 * torch.randn(b, 3, res, res, generator=g)
            flat_idx = (kp[..., 1] * ores + kp[..., 0]).long()
            yield {'imgs': imgs, 'heatmaps': heat, 'keypoints': flat_idx}

    def data_func(phase):
        # the validation images are a fixed set: the generator restarts from one seed each epoch
        return batches(train_stream if phase == 'train' else torch.Generator().manual_seed(1))

    return data_func


def train(train_func, data_func, config):
    for epoch in range(config['train']['epochs']):
        for phase in ['train', 'valid']:
            num_step = config['train'][f'{phase}_iters']
            generator = data_func(phase)
            batch_id = num_step * epoch
            total = 0.0
            for i in range(num_step):
                datas = next(generator)
                total += train_func(batch_id + i, config, phase, **datas)
            print(f'epoch {epoch} {phase} loss {total / num_step:.5f}')


def main():
    torch.manual_seed(0)
    func = make_network(__config__)
    train(func, make_data(__config__), __config__)


if __name__ == '__main__':
    main()
