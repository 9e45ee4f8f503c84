#!/usr/bin/python3
"""PyTorch 1.13 reference of one training step of the same Llama model (HF math in plain torch,
float32, AdamW) for bench/train: prints one JSON object with the median step time and tokens/s.

Usage: /usr/bin/python3 bench/train/torch_reference.py --config CONFIG.json --batch-size 8 --seq-len 256
       [--steps 5] [--threads 1] [--serve]

--serve: for interleaved timing (bench_train). After one warm-up step prints {"ready": ...}; then
for each line "step" on stdin runs one training step and prints {"step_s": ..., "cpu_s": ...,
"loss": ...} on its own line (flushed); "quit" or end of input exits.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Llama(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        C, F, V, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
        NH, KVH = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        HD = C // NH
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.embed = torch.nn.Embedding(V, C)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.ln1 = torch.nn.Parameter(torch.ones(C))
            m.q, m.k, m.v, m.o = lin(C, NH * HD), lin(C, KVH * HD), lin(C, KVH * HD), lin(NH * HD, C)
            m.ln2 = torch.nn.Parameter(torch.ones(C))
            m.gate, m.up, m.down = lin(C, F), lin(C, F), lin(F, C)
            self.layers.append(m)
        self.norm = torch.nn.Parameter(torch.ones(C))
        self.head = lin(C, V)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, inputs, targets):
        cfg = self.cfg
        C, NH, KVH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        HD, eps = C // NH, cfg["rms_norm_eps"]
        b, t = inputs.shape
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, HD, 2).float() / HD))
        freqs = torch.outer(torch.arange(t).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((t, t), float("-inf")).triu(1)
        h = self.embed(inputs)
        for m in self.layers:
            x = rms_norm(h, m.ln1, eps)
            q = m.q(x).view(b, t, NH, HD).transpose(1, 2)
            k = m.k(x).view(b, t, KVH, HD).transpose(1, 2)
            v = m.v(x).view(b, t, KVH, HD).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            rep = NH // KVH
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(HD) + mask, dim=-1)
            h = h + m.o((att @ v).transpose(1, 2).reshape(b, t, C))
            x = rms_norm(h, m.ln2, eps)
            h = h + m.down(torch.nn.functional.silu(m.gate(x)) * m.up(x))
        logits = self.head(rms_norm(h, self.norm, eps))
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = json.load(open(a.config))
    model = Llama(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    V = cfg["vocab_size"]
    inputs = torch.randint(0, V, (a.batch_size, a.seq_len))
    targets = torch.randint(0, V, (a.batch_size, a.seq_len))

    def step():
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return time.perf_counter() - t0, time.process_time() - c0, loss.item()

    if a.serve:
        step()  # warm-up
        print(json.dumps({"ready": True, "threads": a.threads, "torch": torch.__version__}), flush=True)
        while sys.stdin.readline().strip() == "step":
            w, c, l = step()
            print(json.dumps({"step_s": w, "cpu_s": c, "loss": l}), flush=True)
        return
    times, cpus = [], []
    for i in range(a.steps + 1):  # the first step warms up
        w, c, l = step()
        if i > 0:
            times.append(w)
            cpus.append(c)
    med = statistics.median(times)
    print(json.dumps({"step_s": med, "cpu_s": statistics.median(cpus), "tokens_per_s": a.batch_size * a.seq_len / med, "threads": a.threads,
                      "loss": l, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
