#!/usr/bin/env python3
"""Train an HF-convention Llama on the CPU with SNIP plans, the way a cluster job would:
data-parallel over N processes (torch.distributed, gloo), a snip-plan/1 applied to every
linear layer, and every --replan-every steps a statistics round + `snip solve` + the new plan
applied at the next step boundary. The statistics files land in --workdir for `snip import`.

  /usr/bin/python3 integrations/pytorch/examples/train_llama.py --steps 40 --replan-every 20 \
      --budget 0.5 --world-size 2 --workdir /tmp/snip-torch-run

Byte-level tokens (vocab 256) from --data (text or .gz; default: the bundled KJV corpus).
"""
import argparse
import gzip
import math
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from snip_torch import Replanner, apply_plan, current_plan, set_step  # noqa: E402
from snip_torch.tiny_llama import LlamaConfig, LlamaForCausalLM  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def load_tokens(path: str) -> torch.Tensor:
    p = Path(path)
    raw = gzip.open(p, "rb").read() if p.suffix == ".gz" else p.read_bytes()
    return torch.frombuffer(bytearray(raw[:4_000_000]), dtype=torch.uint8).long()  # byte tokens, vocab 256


def batch_at(tokens: torch.Tensor, step: int, batch: int, seq: int, seed: int) -> torch.Tensor:
    """(batch, seq+1) random windows, a pure function of (seed, step): every rank sees the same
    global batch and takes its own rows."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, tokens.numel() - seq - 1, (batch,), generator=g)
    return torch.stack([tokens[s:s + seq + 1] for s in starts.tolist()])


def lr_at(step: int, args) -> float:
    """Linear warmup, then cosine to lr/10."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    f = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr / 10 + 0.5 * (args.lr - args.lr / 10) * (1 + math.cos(math.pi * f))


def train(rank: int, world: int, port: int, args) -> None:
    if world > 1:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(max(1, args.threads // world))
    torch.manual_seed(args.seed)
    if args.checkpoint:
        model = LlamaForCausalLM.from_pretrained(args.checkpoint)
    else:
        model = LlamaForCausalLM(LlamaConfig(hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                                             num_hidden_layers=args.layers, num_attention_heads=4,
                                             num_key_value_heads=2, vocab_size=256))
    if args.plan:
        apply_plan(model, args.plan, recipe=args.recipe)
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    replanner = None
    if args.replan_every > 0:
        replanner = Replanner(model, opt, args.replan_every, args.budget, args.workdir, recipe=args.recipe,
                              first=args.first_replan, grad_clip=args.clip, snip=args.snip)
    tokens = load_tokens(args.data)
    per = args.batch_size // world
    t0 = time.time()
    for step in range(args.steps):
        rows = batch_at(tokens, step, args.batch_size, args.seq_len, args.seed)[rank * per:(rank + 1) * per]
        x, y = rows[:, :-1], rows[:, 1:]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        if replanner is not None:  # step boundary: the round sees this step's batch, weights unchanged
            plan = replanner.step_boundary(step, (x, y))
            if plan is not None and rank == 0:
                print(f"step {step}: new plan, FP4 FLOP fraction {plan.get('achieved_fp4_fraction'):.3f} "
                      f"({replanner.history[-1]['stats']})", flush=True)
        else:
            set_step(model, step)
        loss = torch.nn.functional.cross_entropy(net(x).reshape(-1, 256), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        if rank == 0 and (step % args.log_every == 0 or step == args.steps - 1):
            print(f"step {step:5d} loss {loss.item():.4f} lr {lr_at(step, args):.2e} "
                  f"{(time.time() - t0) / (step + 1):.2f} s/step", flush=True)
    if rank == 0:
        out = Path(args.workdir) / "final"
        model.save_pretrained(out)
        fp4 = sum(1 for p in current_plan(model).values() for g in p.values() if g == "fp4")
        print(f"saved {out} (HF-style checkpoint); {fp4} GEMMs in FP4 at the end", flush=True)
    if world > 1:
        dist.destroy_process_group()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO / "resources" / "corpus" / "kjv.txt.gz"))
    ap.add_argument("--checkpoint", help="HF-style folder (config.json + model.safetensors), e.g. from snip train")
    ap.add_argument("--plan", help="snip-plan/1 file to start with (default: plain FP32 layers until the first re-plan)")
    ap.add_argument("--recipe", default="snip", choices=["snip", "mx", "nvfp4", "tensor"])
    ap.add_argument("--replan-every", type=int, default=0, help="statistics round + snip solve every N steps (0: never)")
    ap.add_argument("--first-replan", type=int, default=0, help="step of the first round")
    ap.add_argument("--budget", type=float, default=0.5, help="FP4 FLOP fraction for snip solve")
    ap.add_argument("--snip", help="path of the snip executable (default: $SNIP_BIN, PATH, or the checkout's build)")
    ap.add_argument("--workdir", default="snip-torch-run")
    ap.add_argument("--world-size", type=int, default=1, help="data-parallel processes (gloo on localhost)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=8, help="global batch rows (split over the processes)")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args(argv)
    if args.batch_size % args.world_size:
        ap.error("--batch-size must be divisible by --world-size")
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.world_size > 1:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(train, args=(args.world_size, port, args), nprocs=args.world_size, join=True)
    else:
        train(0, 1, 0, args)


if __name__ == "__main__":
    main()
