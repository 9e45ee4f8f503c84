"""A minimal Hugging Face-convention Llama in plain torch (no `transformers` needed), with the
same module names as transformers' LlamaForCausalLM (model.embed_tokens,
model.layers.N.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, input_layernorm,
post_attention_layernorm}, model.norm, lm_head) and the same math as the workbench's C++
model (RMSNorm, half-split RoPE, causal GQA attention, SwiGLU). Loads and saves HF-style
checkpoint folders (config.json + model.safetensors) with a small pure-Python safetensors
reader, so a checkpoint of `snip train` runs here unchanged.

Shapes: B batch, T tokens, C hidden, NH/KVH heads, HD head dim, F intermediate, V vocab.
"""
import json
import math
import struct
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as Fn
from torch import nn


@dataclass
class LlamaConfig:
    hidden_size: int = 64
    intermediate_size: int = 176
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    vocab_size: int = 256
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False

    @classmethod
    def from_dict(cls, d: dict) -> "LlamaConfig":
        known = {f.name for f in fields(cls)}
        c = cls(**{k: v for k, v in d.items() if k in known})
        if "num_key_value_heads" not in d:
            c.num_key_value_heads = c.num_attention_heads
        return c

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


class RMSNorm(nn.Module):
    def __init__(self, c: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.eps = eps

    def forward(self, x):  # y = x / sqrt(mean(x²) + eps) · w
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, cos, sin):
    """x (B,T,H,HD): pairs (i, i+HD/2) rotate by angle t·θ^(-2i/HD)."""
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * hd, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * hd, c.hidden_size, bias=False)

    def forward(self, x, cos, sin):  # x (B,T,C)
        B, T, _ = x.shape
        c, hd = self.c, self.c.head_dim
        q = rope(self.q_proj(x).view(B, T, c.num_attention_heads, hd), cos, sin).transpose(1, 2)  # (B,NH,T,HD)
        k = rope(self.k_proj(x).view(B, T, c.num_key_value_heads, hd), cos, sin).transpose(1, 2)  # (B,KVH,T,HD)
        v = self.v_proj(x).view(B, T, c.num_key_value_heads, hd).transpose(1, 2)
        rep = c.num_attention_heads // c.num_key_value_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)  # (B,NH,T,T)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, c.num_attention_heads * hd)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):  # SwiGLU: down(silu(gate(x)) · up(x))
        return self.down_proj(Fn.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, r, cos, sin):  # R_b -> M_b = R_b + attn -> R_{b+1} = M_b + mlp
        m = r + self.self_attn(self.input_layernorm(r), cos, sin)
        return m + self.mlp(self.post_attention_layernorm(m))


class LlamaModel(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.c = c

    def forward(self, input_ids):
        """Z: the last block's residual-stream output (B,T,C), before the final norm."""
        T = input_ids.shape[1]
        hd = self.c.head_dim
        inv = torch.tensor([1.0 / self.c.rope_theta ** (2 * i / hd) for i in range(hd // 2)], dtype=torch.float64)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        cos, sin = ang.cos().float()[None, :, None, :], ang.sin().float()[None, :, None, :]  # (1,T,1,HD/2)
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return h


class LlamaForCausalLM(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.config = c
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        for n, p in self.named_parameters():
            if n.endswith("layernorm.weight") or n == "model.norm.weight":
                continue
            nn.init.normal_(p, std=0.02)

    def head(self, z):
        """logits (B,T,V) from the residual stream Z."""
        return self.lm_head(self.model.norm(z))

    def forward(self, input_ids):
        return self.head(self.model(input_ids))

    # ---- HF-style checkpoint folders -----------------------------------------------------
    @classmethod
    def from_pretrained(cls, folder) -> "LlamaForCausalLM":
        folder = Path(folder)
        cfg = LlamaConfig.from_dict(json.loads((folder / "config.json").read_text()))
        m = cls(cfg)
        tensors = read_safetensors(folder / "model.safetensors")
        sd = m.state_dict()
        missing = [k for k in sd if k not in tensors and not (k == "lm_head.weight" and cfg.tie_word_embeddings)]
        if missing:
            raise ValueError(f"{folder}/model.safetensors lacks {', '.join(missing[:5])}")
        with torch.no_grad():
            for k, v in sd.items():
                if k in tensors:
                    if tuple(tensors[k].shape) != tuple(v.shape):
                        raise ValueError(f"{folder}: {k} has shape {tuple(tensors[k].shape)}, config says {tuple(v.shape)}")
                    v.copy_(tensors[k])
        return m

    def save_pretrained(self, folder) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        d = asdict(self.config)
        d.update({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float32"})
        (folder / "config.json").write_text(json.dumps(d, indent=2))
        sd = {k: v for k, v in self.state_dict().items()
              if not (k == "lm_head.weight" and self.config.tie_word_embeddings)}
        write_safetensors(folder / "model.safetensors", sd)


_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def read_safetensors(path) -> dict:
    """{name: float32 tensor} of a .safetensors file (F32/F16/F64/BF16 tensors)."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a:base + b]
        if info["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif info["dtype"] in _DTYPES:
            arr = np.frombuffer(buf, dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")).astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        out[name] = torch.from_numpy(arr.copy()).view(*info["shape"])
    return out


def write_safetensors(path, tensors: dict) -> None:
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().float().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
