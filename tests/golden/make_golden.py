#!/usr/bin/python3
"""Golden data for the C++ Llama engine from an independent implementation.

Hugging Face LlamaForCausalLM's math written out in plain torch (transformers is not
installed here; every line follows modeling_llama.py: LlamaRMSNorm, rotate_half rotary
embeddings with rope_theta, repeat_kv grouped-query attention with a causal mask, SwiGLU MLP,
mean cross-entropy), in float64 so the reference itself adds no rounding noise.

Writes into tests/golden/data/tiny/:
  config.json            HF config of the golden model
  model.safetensors      FP32 weights (HF names)
  batch.json             inputs/targets (B, T), AdamW hyper-parameters, the loss of every step
  expected.safetensors   logits (B*T, V), "grad.<name>" for every parameter at step 0, and
                         "step3.<name>": the weights after 3 AdamW steps (with clipping) on the batch

Run: /usr/bin/python3 tests/golden/make_golden.py   (needs Debian's python3-torch; the C++ test does not)
"""
import json
import math
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tiny")

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 32, "intermediate_size": 88, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 64, "max_position_embeddings": 16, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False,
    "initializer_range": 0.02, "torch_dtype": "float32",
}
B, T = 2, 12
ADAMW = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "clip": 1.0, "steps": 3}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def rms_norm(x, w, eps):  # LlamaRMSNorm
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(seq_len, dim, base):  # LlamaRotaryEmbedding
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    t = torch.arange(seq_len, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def repeat_kv(x, n_rep):  # (B, KVH, T, HD) -> (B, KVH*n_rep, T, HD), kv head j serves query heads j*n_rep..
    b, kvh, t, hd = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, kvh, n_rep, t, hd).reshape(b, kvh * n_rep, t, hd)


def forward(p, cfg, inputs, targets):
    C, NH, KVH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HD, eps = C // NH, cfg["rms_norm_eps"]
    b, t = inputs.shape
    h = p["model.embed_tokens.weight"][inputs]
    cos, sin = rope_cos_sin(t, HD, cfg["rope_theta"])
    mask = torch.full((t, t), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        x = rms_norm(h, p[pre + "input_layernorm.weight"], eps)
        q = (x @ p[pre + "self_attn.q_proj.weight"].T).view(b, t, NH, HD).transpose(1, 2)
        k = (x @ p[pre + "self_attn.k_proj.weight"].T).view(b, t, KVH, HD).transpose(1, 2)
        v = (x @ p[pre + "self_attn.v_proj.weight"].T).view(b, t, KVH, HD).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, NH // KVH), repeat_kv(v, NH // KVH)
        att = (q @ k.transpose(2, 3)) / math.sqrt(HD) + mask
        att = torch.softmax(att, dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, t, C)
        h = h + o @ p[pre + "self_attn.o_proj.weight"].T
        x = rms_norm(h, p[pre + "post_attention_layernorm.weight"], eps)
        g = x @ p[pre + "mlp.gate_proj.weight"].T
        u = x @ p[pre + "mlp.up_proj.weight"].T
        h = h + (torch.nn.functional.silu(g) * u) @ p[pre + "mlp.down_proj.weight"].T
    h = rms_norm(h, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    logits = h @ head.T
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
    return logits.view(-1, logits.shape[-1]), loss


def main():
    torch.manual_seed(1234)
    cfg = CONFIG
    C, F, V, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    HD = C // cfg["num_attention_heads"]
    QD, KD = cfg["num_attention_heads"] * HD, cfg["num_key_value_heads"] * HD
    shapes = {"model.embed_tokens.weight": (V, C)}
    for l in range(L):
        pre = f"model.layers.{l}."
        shapes.update({pre + "input_layernorm.weight": (C,), pre + "self_attn.q_proj.weight": (QD, C),
                       pre + "self_attn.k_proj.weight": (KD, C), pre + "self_attn.v_proj.weight": (KD, C),
                       pre + "self_attn.o_proj.weight": (C, QD), pre + "post_attention_layernorm.weight": (C,),
                       pre + "mlp.gate_proj.weight": (F, C), pre + "mlp.up_proj.weight": (F, C),
                       pre + "mlp.down_proj.weight": (C, F)})
    shapes["model.norm.weight"] = (C,)
    shapes["lm_head.weight"] = (V, C)
    # Larger-than-HF init (std 0.2, norms around 1) so the golden case is far from "uniform logits".
    params = {}
    for name, shape in shapes.items():
        t = (1 + 0.2 * torch.randn(shape)) if len(shape) == 1 else 0.2 * torch.randn(shape)
        params[name] = t.to(torch.float32).to(torch.float64)  # float32-representable start values
    inputs = torch.randint(0, V, (B, T))
    targets = torch.randint(0, V, (B, T))

    leaves = {n: t.clone().requires_grad_(True) for n, t in params.items()}
    logits, loss = forward(leaves, cfg, inputs, targets)
    loss.backward()
    expected = {"logits": logits}
    for n, t in leaves.items():
        expected["grad." + n] = t.grad.detach().clone()

    # 3 AdamW steps on the same batch with global-norm clipping, torch 1.13's AdamW update.
    decay = [t for n, t in leaves.items() if t.dim() >= 2]
    no_decay = [t for n, t in leaves.items() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"])
    losses, norms = [], []
    for step in range(ADAMW["steps"]):
        opt.zero_grad()
        _, l = forward(leaves, cfg, inputs, targets)
        l.backward()
        losses.append(l.item())
        norms.append(torch.nn.utils.clip_grad_norm_(list(leaves.values()), ADAMW["clip"]).item())
        opt.step()
    for n, t in leaves.items():
        expected["step3." + n] = t.detach()

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(OUT, "model.safetensors"), params)
    write_safetensors(os.path.join(OUT, "expected.safetensors"), expected)
    with open(os.path.join(OUT, "batch.json"), "w") as f:
        json.dump({"B": B, "T": T, "inputs": inputs.view(-1).tolist(), "targets": targets.view(-1).tolist(),
                   "loss": loss.item(), "adamw": ADAMW, "step_losses": losses, "step_grad_norms": norms,
                   "weight_decay_applies_to": "tensors with 2 or more dimensions (not norm weights)",
                   "generator": "tests/golden/make_golden.py (plain-torch HF Llama math, float64)"}, f, indent=1)
    print("loss", loss.item(), "step losses", losses, "grad norms", norms)


if __name__ == "__main__":
    main()
