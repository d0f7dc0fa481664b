"""Data-parallel training of the digits CNN (examples/digits_cnn.py) on two GPUs, one process each.

Each process holds a replica of the simt model (simt_tiles kernels forward and backward) on its own
GPU, takes its half of every global batch, and torch's DistributedDataParallel all-reduces the
gradients over NCCL, so every replica takes the same SGD step as one model on the whole batch::

    torchrun --nproc_per_node 2 examples/digits_ddp.py --steps 10 [--check]

``--check``: rank 0 also trains one model on one GPU with the same global batches and compares the
parameters within :func:`tolerance`.  Not yet run: it needs a machine with two GPUs
(tests/test_devices.py's ``gpus2`` test runs it there).
"""

from __future__ import annotations

import argparse
import os
import sys

# the 2-GPU machine requires NCCL's NVLink multicast (NVLS) off, in every process: set before NCCL starts
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=64, help="the global batch (split over the processes)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--channels", type=int, nargs=2, default=(8, 16))
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--check", action="store_true", help="compare with a one-GPU run of the same global batches")
    a = p.parse_args(argv)
    if a.batch < 1 or a.steps < 1:
        p.error("--batch and --steps must be positive")
    return a


def shard(batch: int, world: int, rank: int) -> slice:
    """``rank``'s part of a global batch of ``batch`` rows: contiguous, sizes differing by at most one.
    DDP averages gradients over processes, so equal parts make that the whole batch's mean: the
    example requires ``batch % world == 0`` (ValueError otherwise)."""
    if batch % world:
        raise ValueError(f"batch: expected a multiple of the {world} processes; got {batch}")
    per = batch // world
    return slice(rank * per, (rank + 1) * per)


def tolerance(steps: int, batch: int, lr: float, lipschitz: float = 10.0) -> float:
    """Absolute tolerance on the parameters after ``steps`` SGD steps, two processes against one.

    The two runs differ only in the order of the gradient's sums (each half's mean, then NCCL's
    average, against one sum over the batch): a relative difference of at most γ_B ≈ B·u per step
    (u = 2⁻²⁴, FP32), scaled by the gradients (|g| ≤ 1 here: log-softmax loss, inputs in [0, 1]).
    A step changes parameters by lr·Δg, and a difference already there grows by at most (1 + lr·L)
    per step for an L-Lipschitz gradient (L ≈ 10 assumed).  So ``steps · B · u · (1 + lr·L)^steps``
    (10 steps, B = 64, lr = 0.05: 2.2e-3; a loose bound, not yet compared with a measurement)."""
    return steps * batch * 2.0**-24 * (1 + lr * lipschitz) ** steps


def _train(model, data, args, part: slice, forward=None):
    import torch

    xtr, ytr = data[0], data[1]
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    forward = forward or model
    order = torch.randperm(len(xtr), generator=gen)
    for step in range(args.steps):
        idx = order[(step * args.batch) % (len(xtr) - args.batch):][:args.batch][part].to(xtr.device)
        loss = model.loss(forward(xtr[idx]), ytr[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model


def main(argv=None):
    import torch
    import torch.distributed as dist

    import digits_cnn

    args = parse_args(argv)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    data = digits_cnn.load(torch.float32, device)
    _, model = digits_cnn.pair(args.seed, tuple(args.channels), args.hidden, torch.float32, device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    _train(model, data, args, shard(args.batch, world, rank), forward=ddp)
    ok = True
    if args.check and rank == 0:
        _, one = digits_cnn.pair(args.seed, tuple(args.channels), args.hidden, torch.float32, device)
        _train(one, data, args, slice(None))
        tol = tolerance(args.steps, args.batch, args.lr)
        worst = max(float((p - q).abs().max()) for p, q in zip(model.parameters(), one.parameters()))
        ok = worst <= tol
        print(f"check: largest parameter difference {worst:.3e} (tolerance {tol:.3e}): {'ok' if ok else 'FAILED'}")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
