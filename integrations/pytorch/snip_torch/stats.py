"""One SNIP statistics round inside PyTorch training (METHOD.md section 4 and 5.2 step 1):
1 clean BF16 pass, 3 backward-noise passes (Hutchinson at every Y_l, per output channel, and
at the residual points R_b / M_b) and 3 antithetic forward-noise pairs at Z, plus every
layer's quantization errors at each candidate precision. Writes the same raw keys as the C++
round (engine/studies/src/stats_round.cpp, engine/planner/include/snip/stats_keys.h) into a
`snip-stats/1` file that `snip import` and `snip solve --stats` read.

The round never changes the model or the optimizer: gradients come from torch.autograd.grad
(no .grad is touched), the BF16 precisions are restored afterwards, and the AdamW state is only
read. Under torch.distributed every rank runs the round on its own shard of the batch with the
loss scaled by 1/world (so gradients are the global batch's): sums over tokens and squared
norms are all-reduced by summation, weight gradients and their quantization errors are summed
before the AdamW terms are formed, mean-type globals are averaged, and rank 0 writes the file.
"""
import copy
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as Fn
from torch import nn

from . import qlinear as QL
from .plan import linear_layers, unwrap
from .qlinear import GemmContext, QuantLinear, RecipeOptions

GEMM_OPERANDS = (  # key, operand tensor, GEMM, role
    ("err_fprop_x", "X", "fprop", "activation"), ("err_fprop_w", "W", "fprop", "weight"),
    ("err_dgrad_g", "G", "dgrad", "gradient"), ("err_dgrad_w", "W", "dgrad", "weight"),
    ("err_wgrad_g", "G", "wgrad", "gradient"), ("err_wgrad_x", "X", "wgrad", "activation"))


def _dist():
    d = torch.distributed
    return d if d.is_available() and d.is_initialized() else None


def _allreduce_sum(t: torch.Tensor) -> torch.Tensor:
    d = _dist()
    if d is not None and d.get_world_size() > 1:
        d.all_reduce(t, op=d.ReduceOp.SUM)
    return t


def _sumsq(t: torch.Tensor) -> float:
    t = t.detach().double()
    return float((t * t).sum())


@contextmanager
def _bf16_everywhere(root: nn.Module, recipe: Optional[str], seed: int, step: int):
    """Every selectable linear layer runs BF16 for the round (plain nn.Linear layers are wrapped
    for its duration); the plan, the modules and the stochastic-rounding keys come back after."""
    saved = []
    layers = list(linear_layers(root))
    paths = {id(m): p for p, m in root.named_modules()}
    for name, idx, mod in layers:
        if isinstance(mod, QuantLinear):
            saved.append((mod, None, dict(mod.precisions), mod.step, mod.seed))
            mod.precisions = {g: "bf16" for g in ("fprop", "dgrad", "wgrad")}
            mod.step, mod.seed = step, seed
        else:
            q = QuantLinear(mod, name, idx, {g: "bf16" for g in ("fprop", "dgrad", "wgrad")},
                            RecipeOptions(recipe or "snip"), seed)
            q.step = step
            path = paths[id(mod)]
            parent, _, attr = path.rpartition(".")
            setattr(root.get_submodule(parent) if parent else root, attr, q)
            saved.append((q, (root.get_submodule(parent) if parent else root, attr, mod), None, None, None))
    try:
        yield
    finally:
        for q, orig, prec, st, sd in saved:
            if orig is not None:
                setattr(orig[0], orig[1], orig[2])
            else:
                q.precisions, q.step, q.seed = prec, st, sd


def _default_loss(logits: torch.Tensor, batch) -> torch.Tensor:
    """Mean next-token cross entropy in FP64. batch = (input_ids, targets) with targets already
    aligned to the inputs, or a dict with "targets", or HF-style "labels" (shifted here)."""
    if isinstance(batch, dict):
        if "targets" in batch:
            tgt = batch["targets"]
        else:
            logits, tgt = logits[:, :-1], batch["labels"][:, 1:]
    else:
        tgt = batch[1]
    return Fn.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), tgt.reshape(-1), ignore_index=-100)


def _inputs(batch):
    return batch["input_ids"] if isinstance(batch, dict) else batch[0]


def _logits(out):
    return out.logits if hasattr(out, "logits") else (out[0] if isinstance(out, (tuple, list)) else out)


def _dims(root: nn.Module, layers) -> dict:
    cfg = getattr(root, "config", None)
    get = (lambda k: cfg.get(k) if isinstance(cfg, dict) else getattr(cfg, k, None)) if cfg is not None else (
        lambda k: None)
    blocks = root.model.layers
    d = {"hidden_size": get("hidden_size") or blocks[0].self_attn.q_proj.in_features,
         "intermediate_size": get("intermediate_size") or blocks[0].mlp.gate_proj.out_features,
         "num_hidden_layers": get("num_hidden_layers") or len(blocks),
         "num_attention_heads": get("num_attention_heads"),
         "num_key_value_heads": get("num_key_value_heads") or get("num_attention_heads")}
    if d["num_attention_heads"] is None:
        raise ValueError("collect_stats: the model has no config.num_attention_heads; give it an HF-style config")
    return {k: int(v) for k, v in d.items()}


def _adam(optimizer: torch.optim.Optimizer, param: torch.nn.Parameter):
    """(exp_avg, exp_avg_sq, t, lr, beta1, beta2, eps, weight_decay) of `param` in a torch AdamW/Adam."""
    for group in optimizer.param_groups:
        if any(p is param for p in group["params"]):
            st = optimizer.state.get(param, {})
            m = st.get("exp_avg", torch.zeros_like(param)).detach().double()
            v = st.get("exp_avg_sq", torch.zeros_like(param)).detach().double()
            t = float(st.get("step", 0))
            b1, b2 = group["betas"]
            wd = group.get("weight_decay", 0.0) if isinstance(optimizer, torch.optim.AdamW) else 0.0
            return m, v, t, float(group["lr"]), float(b1), float(b2), float(group["eps"]), float(wd)
    raise ValueError("collect_stats: a linear layer's weight is not in the optimizer's parameter groups; "
                     "pass the optimizer that trains this model")


def collect_stats(model: nn.Module, batch, optimizer: torch.optim.Optimizer, *, step: int = 0,
                  lr: Optional[float] = None, grad_clip: float = 0.0, precisions: Sequence[str] = ("fp8", "fp4"),
                  noise_passes: int = 3, sigma_eta_rel: float = 1e-2, seed: int = 1, recipe: Optional[str] = None,
                  batch_id: str = "", loss_fn: Optional[Callable] = None, out_path=None,
                  record_vectors: bool = True) -> dict:
    """One statistics round on `batch` (see the module comment). `model` is an HF-convention
    Llama (model.layers.N..., model.norm, lm_head; DDP-wrapped is fine), `optimizer` its
    torch AdamW (read only). lr: η of the next step (default: the optimizer's current lr).
    Returns the snip-stats/1 dict on every rank; rank 0 (or the only process) writes it to
    out_path atomically when given."""
    if noise_passes < 1:
        raise ValueError("collect_stats: noise_passes must be >= 1 (METHOD.md uses 3)")
    if not sigma_eta_rel > 0:
        raise ValueError("collect_stats: sigma_eta_rel must be positive (default 1e-2)")
    root = unwrap(model)
    loss_fn = loss_fn or _default_loss
    d = _dist()
    world = d.get_world_size() if d else 1
    rank = d.get_rank() if d else 0
    layers = list(linear_layers(root))
    if not layers:
        raise ValueError("collect_stats: the model has no Llama linear layers (model.layers.N.self_attn.q_proj ...)")
    n_blocks = len(root.model.layers)
    recipe_name = recipe or next((m.recipe.name for _, _, m in layers if isinstance(m, QuantLinear)), "snip")
    ro = next((m.recipe for _, _, m in layers if isinstance(m, QuantLinear)), RecipeOptions(recipe_name))
    if ro.name != recipe_name:
        ro = RecipeOptions(recipe_name, ro.scale_mode, ro.fp8_gradients_e5m2, ro.bf16_output,
                           ro.hadamard_wgrad and recipe_name == "nvfp4")

    with _bf16_everywhere(root, recipe_name, seed, step):
        layers = list(linear_layers(root))
        cap: Dict[str, dict] = {name: {} for name, _, _ in layers}
        resid: Dict[int, torch.Tensor] = {}
        mid: Dict[int, torch.Tensor] = {}
        zbox = {}
        hooks = []
        for name, _, mod in layers:
            def fh(mod, inp, out, name=name):
                cap[name]["X"], cap[name]["Y"] = inp[0], out
            hooks.append(mod.register_forward_hook(fh))
        for b, blk in enumerate(root.model.layers):
            hooks.append(blk.register_forward_pre_hook(lambda m, inp, b=b: resid.__setitem__(b, inp[0])))
            hooks.append(blk.post_attention_layernorm.register_forward_pre_hook(
                lambda m, inp, b=b: mid.__setitem__(b, inp[0])))
        hooks.append(root.model.layers[-1].register_forward_hook(
            lambda m, inp, out: zbox.__setitem__("Z", out[0] if isinstance(out, (tuple, list)) else out)))
        try:
            with torch.enable_grad():
                logits = _logits(root(_inputs(batch)))
        finally:
            for h in hooks:
                h.remove()
        Z = zbox["Z"]
        loss_local = loss_fn(logits, batch)
        if not torch.isfinite(loss_local):
            raise FloatingPointError(f"statistics round at step {step}: the clean BF16 loss is not finite; "
                                     "the model has diverged")
        params = [p for p in root.parameters() if p.requires_grad]
        Ys = [cap[n]["Y"] for n, _, _ in layers]
        g_all = torch.autograd.grad(loss_local / world, Ys + [Z] + params, retain_graph=True, allow_unused=True)
        Gs = [g.detach() for g in g_all[:len(Ys)]]
        dZ = g_all[len(Ys)].detach()
        pgrads = [torch.zeros_like(p) if g is None else g.detach().clone() for p, g in zip(params, g_all[len(Ys) + 1:])]
        # global gradient (sum of the 1/world-scaled shards) and AdamW's clipping of it
        flat = _allreduce_sum(torch.cat([g.reshape(-1).double() for g in pgrads]))
        gnorm = math.sqrt(float((flat * flat).sum()))
        off = 0
        gparam = {}
        for p in params:
            gparam[id(p)] = flat[off:off + p.numel()].view_as(p)
            off += p.numel()
        s = grad_clip / (gnorm + 1e-6) if grad_clip > 0 and grad_clip / (gnorm + 1e-6) < 1 else 1.0

        tok = torch.tensor([float(_inputs(batch).numel()), _sumsq(dZ), float(dZ.numel()), _sumsq(Z), float(loss_local)],
                           dtype=torch.float64)
        _allreduce_sum(tok)
        tokens = int(tok[0])
        sigma_eps = math.sqrt(tok[1] / tok[2])
        sigma_eta = sigma_eta_rel * math.sqrt(tok[3] / tok[2])
        loss0 = float(tok[4]) / world
        if not sigma_eps > 0:
            raise ValueError("statistics round: dL/dZ is zero; the batch gives no gradient")

        # ---- backward-noise passes: Hutchinson at every Y_l (per channel) and at R_b, M_b ----
        gen = torch.Generator().manual_seed((seed * 0x9E3779B1 + step * 7919 + rank * 104729) % (2 ** 63))
        Rs = [resid[b] for b in range(n_blocks)]
        Ms = [mid[b] for b in range(n_blocks)]
        gain = [torch.zeros(m.out_features, dtype=torch.float64) for _, _, m in layers]
        jt_r = [0.0] * n_blocks
        jt_m = [0.0] * n_blocks
        for _ in range(noise_passes):
            eps = torch.randn(Z.shape, generator=gen, dtype=torch.float32) * sigma_eps
            gr = torch.autograd.grad(Z, Ys + Rs + Ms, eps, retain_graph=True, allow_unused=True)
            for i in range(len(Ys)):
                g = gr[i].detach().double().reshape(-1, gain[i].numel())
                gain[i] += (g * g).sum(0)
            for b in range(n_blocks):
                jt_r[b] += _sumsq(gr[len(Ys) + b])
                jt_m[b] += _sumsq(gr[len(Ys) + n_blocks + b])
        gain = [g / noise_passes for g in gain]
        jt_r = [x / noise_passes for x in jt_r]
        jt_m = [x / noise_passes for x in jt_m]

        # ---- forward-noise passes: antithetic curvature at Z, FP64 ----------------------------
        with torch.no_grad():
            Zd = Z.detach()
            # The head (final norm + lm_head) runs in FP64 on copies, so the tiny antithetic
            # differences are not drowned by FP32 logit rounding (the C++ head is FP32).
            norm64 = copy.deepcopy(root.model.norm).double()
            lm64 = copy.deepcopy(root.lm_head).double()
            head = lambda z: lm64(norm64(z.double()))  # noqa: E731
            l0 = float(loss_fn(head(Zd), batch))
            sd, esq = 0.0, 0.0
            for _ in range(noise_passes):
                eta = torch.randn(Zd.shape, generator=gen, dtype=torch.float32) * sigma_eta
                zp, zm = Zd + eta, Zd - eta
                lp, lm = float(loss_fn(head(zp), batch)), float(loss_fn(head(zm), batch))
                sd += ((lp - l0) + (lm - l0)) / noise_passes
                esq += 0.5 * (_sumsq(zp - Zd) + _sumsq(zm - Zd)) / noise_passes
            cv = _allreduce_sum(torch.tensor([sd, esq, l0], dtype=torch.float64))
            second_diff, eta_sq, loss0_resid = float(cv[0]) / world, float(cv[1]), float(cv[2]) / world
            curvature = second_diff / (2.0 * eta_sq)

        # ---- per layer -------------------------------------------------------------------------
        m0, v0, t, opt_lr, b1, b2, aeps, wd = _adam(optimizer, layers[0][2].weight)
        lr = opt_lr if lr is None else float(lr)
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"statistics round: the learning rate of the next step must be positive (got {lr})")
        t1 = t + 1
        bc1, bc2 = 1 - b1 ** t1, 1 - b2 ** t1
        k_t = s * lr * (1 - b1) / bc1
        out_layers = []
        add_keys: List[tuple] = []  # (layer dict, section, key, is_vector) summed over ranks
        for li, (name, idx, mod) in enumerate(layers):
            block, typ = divmod(idx, 7)
            X = cap[name]["X"].detach().reshape(-1, mod.in_features).float()
            Y = cap[name]["Y"].detach().reshape(-1, mod.out_features).float()
            G = Gs[li].reshape(-1, mod.out_features).float()
            W = mod.weight.detach().float()
            T, K, N = X.shape[0], mod.in_features, mod.out_features
            ctx = GemmContext(ro, seed, step, idx, name)
            xcol = (X.double() ** 2).sum(0)
            ls = {"name": name, "scalars": {}, "per_precision": {}, "vectors": {}}
            sc = ls["scalars"]
            dx_ref = QL.qlinear_dgrad(G, W, "bf16", ctx)
            y_ref = QL.qlinear_fprop(X, W, "bf16", ctx)
            dw_ref_local = QL.qlinear_wgrad(G, X, "bf16", ctx)
            sc.update({"x_norm": _sumsq(X), "y_norm": _sumsq(Y), "g_norm": _sumsq(G), "dx_norm": _sumsq(dx_ref),
                       "jt_eps_sq_y": float(gain[li].sum()),
                       "jt_eps_sq_resid": jt_r[block] if typ <= 3 else jt_m[block]})
            for k in ("x_norm", "y_norm", "g_norm", "dx_norm", "jt_eps_sq_y", "jt_eps_sq_resid"):
                add_keys.append((ls, "scalars", k))
            ls["vectors"] = {"gain_y": gain[li], "x_col_sq": xcol}
            sc["w_norm"] = _sumsq(W)
            # AdamW of the next step on the global gradient (weights are the same on every rank)
            m, v, t_, _, _, _, _, _ = _adam(optimizer, mod.weight)
            gW = gparam[id(mod.weight)]
            g = s * gW
            m1 = b1 * m + (1 - b1) * g
            v1 = b2 * v + (1 - b2) * g * g
            denom = torch.sqrt(v1 / bc2) + aeps
            w_el = 1.0 / (denom * denom)
            u = lr * wd * W.double() + lr / bc1 * m1 / denom
            ls["_adam"] = (w_el, m, v, u, gW)
            for p in precisions:
                pp = {}
                ops = {"X": (X, T, K), "W": (W, N, K), "G": (G, T, N)}
                for key, opn, gemm, role in GEMM_OPERANDS:
                    a = ops[opn][0]
                    pp[key] = _sumsq(QL.quantize_operand(a, p, gemm, role, ctx) - a)
                yq = QL.qlinear_fprop(X, W, p, ctx)
                dxq = QL.qlinear_dgrad(G, W, p, ctx)
                dwq = QL.qlinear_wgrad(G, X, p, ctx)
                pp["dy_err"] = _sumsq(yq - y_ref)
                pp["g_dot_dy"] = float((G.double() * (yq.double() - y_ref.double())).sum())
                pp["ddx_err"] = _sumsq(dxq - dx_ref)
                ddx = (dxq - dx_ref).reshape(cap[name]["X"].shape)
                r2, sib = _resid_err(root, cap, resid, mid, block, typ, ddx)
                pp["resid_err_sq"] = r2
                for st, val in sib.items():
                    pp["sib_dg_sq." + st] = val
                ls["per_precision"][p] = pp
                ls.setdefault("_ddw", {})[p] = (dwq.double() - dw_ref_local.double())
                for k in pp:
                    if k not in ("err_fprop_w", "err_dgrad_w"):
                        add_keys.append((ls, ("per_precision", p), k))
            out_layers.append(ls)

        # ---- reduce across ranks: sums over tokens add, weight gradient errors add ----------------
        vals = []
        for ls, sec, k in add_keys:
            vals.append(ls["scalars"][k] if sec == "scalars" else ls["per_precision"][sec[1]][k])
        red = _allreduce_sum(torch.tensor(vals, dtype=torch.float64)) if vals else torch.zeros(0)
        for (ls, sec, k), v in zip(add_keys, red.tolist()):
            if sec == "scalars":
                ls["scalars"][k] = v
            else:
                ls["per_precision"][sec[1]][k] = v
        for ls in out_layers:
            vec = _allreduce_sum(torch.cat([ls["vectors"]["gain_y"], ls["vectors"]["x_col_sq"]]))
            ng = ls["vectors"]["gain_y"].numel()
            gam, xcol = vec[:ng], vec[ng:]
            w_el, m, v, u, gW = ls.pop("_adam")
            sc = ls["scalars"]
            for k in ("x_norm", "w_norm", "y_norm", "g_norm", "dx_norm"):
                sc[k] = math.sqrt(sc[k])
            sc["dw_norm"] = math.sqrt(_sumsq(gW))
            sc["adam_m_norm"] = math.sqrt(_sumsq(m))
            sc["adam_v_norm"] = math.sqrt(_sumsq(v))
            sc["adam_a"] = float(w_el.mean())
            gs, xs = float(gam.sum()), float(xcol.sum())
            sc["adam_a_gain"] = float((gam[:, None] * xcol[None, :] * w_el).sum()) / (gs * xs) \
                if gs > 0 and xs > 0 else sc["adam_a"]
            sc["update_norm"] = math.sqrt(_sumsq(u))
            for p, ddw in ls.pop("_ddw", {}).items():
                ddw = _allreduce_sum(ddw.clone())
                pp = ls["per_precision"][p]
                for k in ("err_fprop_x", "err_fprop_w", "err_dgrad_g", "err_dgrad_w", "err_wgrad_g", "err_wgrad_x",
                          "dy_err", "ddx_err"):
                    pp[k] = math.sqrt(pp[k])
                pp["ddw_err"] = math.sqrt(_sumsq(ddw))
                pp["own_update_sq"] = float((ddw * ddw * w_el).sum())
                if pp["ddw_err"] > 0:  # the gradient noise monitor's ratio (METHOD.md 10), as the C++ round
                    pp["grad_noise_ratio"] = sc["dw_norm"] / pp["ddw_err"]
            ls["vectors"] = {"gain_y": gam.tolist(), "x_col_sq": xcol.tolist()} if record_vectors else {}

    result = {
        "format": "snip-stats/1", "step": int(step), "batch_id": batch_id, "recipe": recipe_name,
        "model": _dims(root, layers), "tokens": tokens,
        "globals": {"loss0": loss0, "loss0_resid": loss0_resid, "curvature": curvature,
                    "curvature_second_diff": second_diff, "curvature_eta_sq": eta_sq, "sigma_eta": sigma_eta,
                    "sigma_eps": sigma_eps, "noise_passes": noise_passes, "k_t": k_t, "lr": lr, "adam_beta1": b1,
                    "adam_beta2": b2, "adam_eps": aeps, "grad_clip_scale": s, "grad_norm": gnorm, "adam_t": t,
                    "world_size": world},
        "options": {"precisions": list(precisions), "noise_passes": noise_passes, "sigma_eta_rel": sigma_eta_rel,
                    "seed": seed, "lr": lr, "grad_clip": grad_clip, "reference": "bf16",
                    "weight_divergence_mode": "local", "producer": "snip_torch", "world_size": world},
        "layers": out_layers,
    }
    if out_path is not None and rank == 0:
        write_stats(result, out_path)
    return result


def write_stats(stats: dict, path) -> None:
    """Writes a snip-stats/1 dict atomically (temporary file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(stats, f)
        f.write("\n")
    os.replace(tmp, path)


def _resid_err(root, cap, resid, mid, block: int, typ: int, ddx: torch.Tensor):
    """Layer (block, typ)'s dgrad error δdX mapped exactly to its residual point by the local
    backward (METHOD.md 5.2 step 1): ‖δr‖², and for o / down the siblings' ‖δG‖²."""
    pre = f"model.layers.{block}."
    q, k, v, o, gate, up = (pre + "self_attn.q_proj", pre + "self_attn.k_proj", pre + "self_attn.v_proj",
                            pre + "self_attn.o_proj", pre + "mlp.gate_proj", pre + "mlp.up_proj")
    blk = root.model.layers[block]
    sib = {}
    if typ in (0, 1, 2):  # input_layernorm backward -> R_b
        dln, ln_out, point = ddx, cap[q]["X"], resid[block]
    elif typ in (4, 5):   # post_attention_layernorm backward -> M_b
        dln, ln_out, point = ddx, cap[gate]["X"], mid[block]
    elif typ == 3:        # attention backward -> δG at q, k, v; their FP32 dgrads; input_layernorm backward
        dq, dk, dv = torch.autograd.grad(cap[o]["X"], [cap[q]["Y"], cap[k]["Y"], cap[v]["Y"]], ddx,
                                         retain_graph=True)
        sib = {"q": _sumsq(dq), "k": _sumsq(dk), "v": _sumsq(dv)}
        dln = sum(g.reshape(-1, g.shape[-1]).float() @ blk_w(blk, n).float() for g, n in
                  ((dq, "q"), (dk, "k"), (dv, "v"))).reshape(cap[q]["X"].shape)
        ln_out, point = cap[q]["X"], resid[block]
    else:                 # down: SwiGLU backward -> δG at gate, up; their FP32 dgrads; post_attention_layernorm
        dg, du = torch.autograd.grad(cap[pre + "mlp.down_proj"]["X"], [cap[gate]["Y"], cap[up]["Y"]], ddx,
                                     retain_graph=True)
        sib = {"gate": _sumsq(dg), "up": _sumsq(du)}
        dln = sum(g.reshape(-1, g.shape[-1]).float() @ blk_w(blk, n).float() for g, n in
                  ((dg, "gate"), (du, "up"))).reshape(cap[gate]["X"].shape)
        ln_out, point = cap[gate]["X"], mid[block]
    (dr,) = torch.autograd.grad(ln_out, [point], dln.to(ln_out.dtype), retain_graph=True)
    return _sumsq(dr), sib


def blk_w(blk, short: str) -> torch.Tensor:
    mods = {"q": blk.self_attn.q_proj, "k": blk.self_attn.k_proj, "v": blk.self_attn.v_proj,
            "gate": blk.mlp.gate_proj, "up": blk.mlp.up_proj}
    return mods[short].weight.detach()
