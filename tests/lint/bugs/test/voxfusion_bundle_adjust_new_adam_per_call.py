"""
Shape: neural SLAM mapper. A Mapping class owns a learnable voxel embedding tensor and an SDF decoder; its run loop pulls tracked frames from a queue and calls do_mapping() once per frame, which picks a window of keyframes and hands everything to a free helper bundle_refine(keyframes, embeddings, map_states, decoder, criterion, ..., lrs, refine_pose, refine_decoder). The helper assembles parameter groups (embeddings, decoder, per-keyframe pose parameters) and runs a short inner loop of ray sampling, rendering and zero_grad/backward/step.
Bug: the helper constructs a brand-new torch.optim.Adam from the parameter groups on every call, i.e. once per mapped frame, so the Adam moment estimates for the embeddings, decoder and keyframe poses are thrown away every mapping round and each round starts from step 1.
Thread: https://github.com/zju3dv/Vox-Fusion/issues/31
"""
import random

import torch

from variations.render_helpers import render_rays


def bundle_refine(keyframes, embeddings, map_states, decoder, criterion, voxel_size, step_size,
                  n_rays=512, n_iters=10, trunc=0.1, max_hits=10, max_dist=10,
                  lrs=(1e-2, 5e-3), refine_pose=True, refine_decoder=True):
    groups = [{"params": embeddings, "lr": lrs[0]}]
    if refine_decoder:
        groups.append({"params": decoder.parameters(), "lr": lrs[0]})
    for kf in keyframes:
        if kf.stamp != 0 and refine_pose:
            kf.pose.requires_grad_(True)
            groups.append({"params": kf.pose.parameters(), "lr": lrs[1]})

    adam = torch.optim.Adam(groups)
    for _ in range(n_iters):
        origins, dirs, colors, depths = [], [], [], []
        for kf in keyframes:
            c2w = kf.get_pose().cuda()
            kf.sample_rays(n_rays)
            mask = kf.sample_mask.cuda()
            d = kf.rays_d[mask].cuda() @ c2w[:3, :3].transpose(-1, -2)
            o = c2w[:3, 3].reshape(1, -1).expand_as(d)
            dirs.append(d)
            origins.append(o)
            colors.append(kf.rgb.cuda()[mask])
            depths.append(kf.depth.cuda()[mask])

        rendered = render_rays(
            torch.cat(origins, 0).unsqueeze(0),
            torch.cat(dirs, 0).unsqueeze(0),
            map_states, decoder, step_size, voxel_size, trunc, max_hits, max_dist,
        )
        loss, _ = criterion(rendered, (torch.cat(colors, 0).unsqueeze(0),
                                       torch.cat(depths, 0).unsqueeze(0)))
        adam.zero_grad()
        loss.backward()
        adam.step()


class Mapping:
    def __init__(self, args, decoder, criterion, n_voxels, embed_dim):
        self.decoder = decoder.cuda()
        self.criterion = criterion
        self.voxel_size = args.voxel_size
        self.step_size = args.step_size
        self.n_rays = args.n_rays
        self.n_iters = args.num_iterations
        self.trunc = args.sdf_truncation
        self.max_hits = args.max_voxel_hit
        self.max_dist = args.max_distance
        self.window = args.window_size
        self.keyframes = []
        self.map_states = {}
        self.embeddings = torch.zeros((n_voxels, embed_dim), requires_grad=True,
                                      dtype=torch.float32, device=torch.device("cuda"))
        torch.nn.init.normal_(self.embeddings, std=0.01)

    def pick_window(self, tracked=None):
        if len(self.keyframes) <= self.window:
            chosen = self.keyframes[:]
        else:
            chosen = random.sample(self.keyframes, self.window)
        if tracked is not None and tracked not in chosen:
            chosen.append(tracked)
        return chosen

    def do_mapping(self, tracked=None, refine_pose=True, refine_decoder=True):
        self.decoder.train()
        window = self.pick_window(tracked)
        bundle_refine(
            window, self.embeddings, self.map_states, self.decoder, self.criterion,
            self.voxel_size, self.step_size, self.n_rays, self.n_iters, self.trunc,
            self.max_hits, self.max_dist, lrs=(1e-2, 1e-3),
            refine_pose=refine_pose, refine_decoder=refine_decoder,
        )

    def run(self, frame_queue, n_final_rounds=100):
        while True:
            frame = frame_queue.get()
            if frame is None:
                break
            if frame.is_keyframe:
                self.keyframes.append(frame)
            self.do_mapping(tracked=frame)

        self.n_iters = 1
        for _ in range(n_final_rounds):
            self.do_mapping(tracked=None, refine_pose=False, refine_decoder=False)
