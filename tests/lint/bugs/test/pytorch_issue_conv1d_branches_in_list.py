"""
Shape: text CNN nn.Module whose __init__ assigns a literal list of three Conv1d layers (kernel sizes 3, 4, 5) to self.branches; the net is instantiated and moved with .cuda().
Bug: the Conv1d layers are kept in a plain Python list, so they are not registered and .cuda() leaves them on the CPU.
Thread: https://github.com/pytorch/pytorch/issues/1053
"""
import torch as th

import config


class TextCNN(th.nn.Module):
    def __init__(self):
        super(TextCNN, self).__init__()
        self.branches = [
            th.nn.Conv1d(config.WORD_VEC_SIZE, 1, 3),
            th.nn.Conv1d(config.WORD_VEC_SIZE, 1, 4),
            th.nn.Conv1d(config.WORD_VEC_SIZE, 1, 5),
        ]


clf = TextCNN()
clf.cuda()
