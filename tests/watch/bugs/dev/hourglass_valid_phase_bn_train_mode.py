"""A stacked-hourglass pose training setup: a task module holds a __config__ dict ('inference' and
'train' sections), make_network(configs) wraps the pose net in a Trainer nn.Module (loss computed
inside forward while training), builds Adam and returns a make_train(batch_id, config, phase,
**inputs) closure; a train(train_func, data_func, config) driver runs a 'train' phase and then a
'valid' phase each epoch, pulling batches from a per-phase generator. The closure calls
net.train() for every phase and only skips the optimizer step for 'valid', so validation batches
go through BatchNorm in training mode: the logged validation loss is computed with batch
statistics, and the validation images are written into the running mean/var the model keeps.

Thread: https://github.com/princeton-vl/pytorch_stacked_hourglass/pull/45
"""
import torch
from torch import nn

__config__ = {
    'inference': {'nstack': 2, 'inp_dim': 32, 'oup_dim': 4, 'keys': ['imgs']},
    'train': {
        'batchsize': 8,
        'input_res': 32,
        'output_res': 16,
        'train_iters': 20,
        'valid_iters': 5,
        'epoch_num': 4,
        'learning_rate': 1e-3,
        'loss': [['combined_hm_loss', 1]],
        'decay_iters': 60,
        'decay_lr': 2e-4,
    },
}


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout), nn.ReLU())


class Hourglass(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.skip = conv_bn(f, f)
        self.down = conv_bn(f, f, stride=2)
        self.inner = conv_bn(f, f)
        self.up = nn.Upsample(scale_factor=2)

    def forward(self, x):
        return self.skip(x) + self.up(self.inner(self.down(x)))


class PoseNet(nn.Module):
    def __init__(self, nstack, inp_dim, oup_dim, **kwargs):
        super().__init__()
        self.nstack = nstack
        self.pre = nn.Sequential(conv_bn(3, inp_dim, stride=2), conv_bn(inp_dim, inp_dim))
        self.hgs = nn.ModuleList([Hourglass(inp_dim) for _ in range(nstack)])
        self.outs = nn.ModuleList([nn.Conv2d(inp_dim, oup_dim, 1) for _ in range(nstack)])
        self.merge = nn.ModuleList([nn.Conv2d(oup_dim, inp_dim, 1) for _ in range(nstack - 1)])

    def forward(self, imgs):
        x = self.pre(imgs)
        preds = []
        for i in range(self.nstack):
            feat = self.hgs[i](x)
            preds.append(self.outs[i](feat))
            if i < self.nstack - 1:
                x = x + feat + self.merge[i](preds[-1])
        return torch.stack(preds, 1)

    def calc_loss(self, combined_hm_preds, heatmaps):
        return ((combined_hm_preds[0] - heatmaps[:, None]) ** 2).mean(dim=(1, 2, 3, 4))


class Trainer(nn.Module):
    """Wraps the network: returns predictions at inference time, predictions and loss in training."""

    def __init__(self, model, inference_keys, calc_loss=None):
        super().__init__()
        self.model = model
        self.keys = inference_keys
        self.calc_loss = calc_loss

    def forward(self, imgs, **inputs):
        labels = {k: v for k, v in inputs.items() if k not in self.keys}
        if not self.training:
            return self.model(imgs)
        combined_hm_preds = [self.model(imgs)]
        loss = self.calc_loss(**labels, combined_hm_preds=combined_hm_preds)
        return combined_hm_preds + [loss]


def make_network(configs):
    train_cfg, config = configs['train'], configs['inference']
    pose_net = PoseNet(**config)
    config['net'] = Trainer(pose_net, config['keys'], pose_net.calc_loss)
    train_cfg['optimizer'] = torch.optim.Adam(config['net'].parameters(), train_cfg['learning_rate'])

    def make_train(batch_id, config, phase, **inputs):
        net = config['inference']['net']
        net = net.train()
        if phase != 'inference':
            result = net(inputs['imgs'], **{k: v for k, v in inputs.items() if k != 'imgs'})
            num_loss = len(config['train']['loss'])
            losses = {name: result[-num_loss + idx] * w for idx, (name, w) in enumerate(config['train']['loss'])}
            loss = sum(torch.mean(v) for v in losses.values())
            if phase == 'train':
                optimizer = train_cfg['optimizer']
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if batch_id == config['train']['decay_iters']:
                    for group in optimizer.param_groups:
                        group['lr'] = config['train']['decay_lr']
            return loss.item()
        net = net.eval()
        return {'preds': net(**inputs)}

    return make_train


def make_data_func(config):
    tc = config['train']
    res, ores, njoints = tc['input_res'], tc['output_res'], config['inference']['oup_dim']
    yy, xx = torch.meshgrid(torch.arange(ores).float(), torch.arange(ores).float(), indexing='ij')
    streams = {'train': torch.Generator().manual_seed(0), 'valid': torch.Generator().manual_seed(1)}

    def data_func(phase):
        g = streams[phase]
        while True:
            b = tc['batchsize']
            kp = torch.rand(b, njoints, 2, generator=g) * (ores - 4) + 2
            heat = torch.exp(-((xx - kp[..., 0, None, None]) ** 2 + (yy - kp[..., 1, None, None]) ** 2) / 2.0)
            up = nn.functional.interpolate(heat, size=(res, res), mode='bilinear', align_corners=False)
            colours = torch.tensor([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.2, 1.0], [0.8, 0.8, 0.2]])
            imgs = torch.einsum('bjhw,jc->bchw', up, colours) + 0.2 * torch.randn(b, 3, res, res, generator=g)
            yield {'imgs': imgs, 'heatmaps': heat}

    return data_func


def train(train_func, data_func, config):
    config['train']['epoch'] = 0
    while config['train']['epoch'] < config['train']['epoch_num']:
        for phase in ['train', 'valid']:
            num_step = config['train'][f'{phase}_iters']
            generator = data_func(phase)
            batch_id = num_step * config['train']['epoch']
            total = 0.0
            for i in range(num_step):
                datas = next(generator)
                total += train_func(batch_id + i, config, phase, **datas)
            print(f"epoch {config['train']['epoch']} {phase} loss {total / num_step:.5f}")
        config['train']['epoch'] += 1


def main():
    torch.manual_seed(0)
    func = make_network(__config__)
    train(func, make_data_func(__config__), __config__)


if __name__ == '__main__':
    main()
