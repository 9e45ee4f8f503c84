#!/usr/bin/python3
"""Plots and tables of the regime map (experiments/REGIMES.md) from stored compares.

Input: the JSON of stored `snip compare` tables, one file each, as printed by
    snip show --db regimes.db --compare ID --json > NAME.json
Output (in --out): tables.md (one markdown table per compare, with the headline numbers:
uniform FP4's gap in intervals, SNIP's verdicts and regret to the oracle), and
    gap_vs_budget.png       train gap to BF16 (mean ± 95% half-width) against the FP4 budget,
                            one line per method, for compares that differ only in the budget
    gap_vs_step_NAME.png    per-step train-loss gap to BF16 of each arm of compare NAME
                            (--curve NAME: replicate-paired, 10-step running mean, band = 95% t)
    gap_vs_granularity.png  uniform FP4's and SNIP's train gap against the scaling granularity
                            (elements per scale along the reduction, 16 … per tensor)

Uses python3-matplotlib (Debian package; scripts/setup.sh installs it): the plots need error
bars, categorical and log axes, which the Qt chart widget of ui/ does not draw.
Run with the system interpreter: /usr/bin/python3 experiments/plot_regimes.py ...
"""
import argparse
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Two-sided 95% Student-t quantiles for the per-step bands (df = K − 1); the tables themselves
# use the intervals `snip show` computed (Boost.Math), never these.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def load(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += load(sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".json")))
            continue
        with open(p, encoding="utf-8") as f:
            j = json.load(f)
        j["_name"] = os.path.splitext(os.path.basename(p))[0]
        out.append(j)
    return out


def row(c, method):
    for r in c["rows"]:
        if r["method"] == method:
            return r
    return None


def snip_row(c):
    for r in c["rows"]:
        if r.get("snip_reference"):
            return r
    return None


def pm(mean, hw):
    if mean is None:
        return "–"
    return f"{mean:+.4f} ± {hw:.4f}" if hw is not None else f"{mean:+.4f}"


def intervals(mean, hw):
    """How many half-widths the mean lies from 0 (None without an interval)."""
    if mean is None or not hw:
        return None
    return abs(mean) / hw


def table(c):
    lines = [
        f"### {c['_name']}: compare {c['id']}, recipe `{c['recipe']}`, budget {c['budget']}, "
        f"{c['steps']} steps from step {c['start_step']}, K = {c['replicates']}",
        "",
        "| method | ρ | gap train (mean ± 95%) | vs SNIP (train) | verdict | gap val (mean ± 95%) | verdict val |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in c["rows"]:
        same = f" (= {r['same_plan_as']})" if r.get("same_plan_as") else ""
        ref = r.get("snip_reference")
        lines.append(
            f"| {r['method']}{same} | {r['achieved_fraction']:.3f} | {pm(r['gap_train_mean'], r['gap_train_ci95'])} | "
            f"{'reference' if ref else pm(r['diff_vs_snip_mean'], r['diff_vs_snip_ci95'])} | "
            f"{'' if ref else (r['verdict'] or '')} | {pm(r['gap_val_mean'], r['gap_val_ci95'])} | "
            f"{'' if ref else (r['verdict_val'] or '')} |"
        )
    lines.append("")
    lines += headline(c)
    lines.append("")
    return lines


def headline(c):
    out = []
    fp4 = row(c, "uniform-fp4")
    if fp4:
        n = intervals(fp4["gap_train_mean"], fp4["gap_train_ci95"])
        out.append(
            f"- uniform FP4 costs {pm(fp4['gap_train_mean'], fp4['gap_train_ci95'])} train"
            + (f" = **{n:.1f} half-widths** from 0" if n is not None else "")
            + f"; val {pm(fp4['gap_val_mean'], fp4['gap_val_ci95'])}"
        )
    ref = snip_row(c)
    baselines = [
        r for r in c["rows"]
        if r is not ref and r["method"] not in ("uniform-bf16", "uniform-fp8", "uniform-fp4", "oracle")
        and not r["method"].startswith("snip")
    ]
    if baselines:
        verdicts = ", ".join(f"{r['method']} {r['verdict']}" for r in baselines)
        better_than_all = all(r["verdict"] == "worse" for r in baselines)
        out.append(
            f"- SNIP against each baseline (the baseline's verdict, train): {verdicts} → SNIP "
            + ("**significantly better than every baseline**" if better_than_all else "not significantly better than every baseline")
        )
    reg = c.get("regret_vs_oracle")
    if reg:
        t, v = reg["train"], reg["val"]
        out.append(f"- SNIP's regret to the oracle: train {pm(t['mean'], t['ci95'])}, val {pm(v['mean'], v['ci95'])}")
    return out


def arm_label(m):
    return m.replace("snip λ=0.1", "SNIP (λ 0.1)")


COLORS = {
    "snip λ=0.1": "tab:red", "oracle": "black", "min-err": "tab:blue", "hawq": "tab:green",
    "random s1": "tab:gray", "uniform-fp4": "tab:purple", "min-rel-err": "tab:orange",
    "e-layer-type": "tab:brown", "e-layer-id": "tab:pink", "uniform-fp8": "tab:olive",
    "fp4-fprop-only": "tab:cyan", "fp4-dgrad-only": "darkgoldenrod", "fp4-wgrad-only": "teal",
    "snip λ=1": "salmon", "snip λ=10": "darkred",
}


def checkpoint_name(c):
    """The compare's checkpoint folder name: stored paths may be relative or absolute."""
    return os.path.basename(os.path.normpath(c["checkpoint"]))


def replicates_text(group):
    """"6" when every compare of the group has 6 replicates; "3–6" (the points use the most) otherwise."""
    ks = sorted({c["replicates"] for c in group})
    return str(ks[0]) if len(ks) == 1 else f"{ks[0]}–{ks[-1]} (each point the most)"


def plot_gap_vs_budget(cs, path):
    groups = {}
    for c in cs:
        # compares that differ only in the budget: the same planning options too (a per-role SNIP
        # is another method than a whole-layer one)
        per_role = bool(c.get("options", {}).get("resume", {}).get("per-role", False))
        groups.setdefault((c["recipe"], c["steps"], c["start_step"], checkpoint_name(c), per_role), []).append(c)
    groups = {k: v for k, v in groups.items() if len({c["budget"] for c in v}) >= 2}
    if not groups:
        return False
    fig, axes = plt.subplots(1, len(groups), figsize=(6.5 * len(groups), 4.2), squeeze=False)
    for ax, ((recipe, steps, start, ck, per_role), group) in zip(axes[0], sorted(groups.items())):
        methods = []
        for c in group:
            for r in c["rows"]:
                if r["method"] not in methods and r["method"] not in ("uniform-bf16", "uniform-fp8"):
                    methods.append(r["method"])
        for k, m in enumerate(methods):
            # uniform FP4 is the ρ = 1 end whatever the compare's budget: drawn there, once
            # one point per budget: of the compares that have the arm, the one with the most replicates,
            # then the earliest (a later compare at the same budget, e.g. one re-run with an oracle arm,
            # adds only the arms the earlier one lacks)
            by_budget = {}
            for c in sorted(group, key=lambda c: (-c["replicates"], c["id"])):
                if row(c, m):
                    # fixed arms sit at their own FP4 fraction (uniform FP4 at 1, a role arm at 1/3)
                    fixed = m == "uniform-fp4" or m.startswith("fp4-")
                    by_budget.setdefault(row(c, m)["achieved_fraction"] if fixed else c["budget"], row(c, m))
            pts = sorted(by_budget.items())
            xs = [b + (k - len(methods) / 2) * 0.004 for b, _ in pts]  # dodge the error bars
            ys = [r["gap_train_mean"] for _, r in pts]
            es = [r["gap_train_ci95"] or 0 for _, r in pts]
            ax.errorbar(xs, ys, yerr=es, marker="o", ms=4, capsize=3, label=arm_label(m), color=COLORS.get(m))
        ax.axhline(0, color="0.7", lw=0.8)
        ax.set_xlabel("FP4 FLOP budget ρ")
        ax.set_ylabel("train-loss gap to BF16 (last-window mean)")
        ax.set_title(f"{ck}: recipe {recipe}, {steps} steps from step {start}{', SNIP per role' if per_role else ''}\n"
                     f"mean ± 95% Student-t half-width, K = {replicates_text(group)} paired replicates", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def running_mean(xs, w):
    out, s = [], 0.0
    for i, x in enumerate(xs):
        s += x
        if i >= w:
            s -= xs[i - w]
        out.append(s / min(i + 1, w))
    return out


def plot_gap_vs_step(c, path, window=10):
    bf16 = row(c, "uniform-bf16")
    base = bf16["replicate_train_curves"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in c["rows"]:
        if r["method"] in ("uniform-bf16", "uniform-fp8") or r.get("same_plan_as"):
            continue
        diffs = [running_mean([a - b for a, b in zip(cur, b0)], window) for cur, b0 in zip(r["replicate_train_curves"], base)]
        k = len(diffs)
        n = min(len(d) for d in diffs)
        steps = list(range(c["start_step"] + 1, c["start_step"] + n + 1))
        mean = [sum(d[i] for d in diffs) / k for i in range(n)]
        color = COLORS.get(r["method"])
        ax.plot(steps, mean, label=arm_label(r["method"]), color=color, lw=1.4)
        if k >= 2:
            sd = [math.sqrt(sum((d[i] - mean[i]) ** 2 for d in diffs) / (k - 1)) for i in range(n)]
            hw = [T95.get(k - 1, 2.0) * s / math.sqrt(k) for s in sd]
            ax.fill_between(steps, [m - h for m, h in zip(mean, hw)], [m + h for m, h in zip(mean, hw)],
                            color=color, alpha=0.12, lw=0)
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"train-loss gap to BF16 ({window}-step running mean)")
    ax.set_title(f"{c['_name']}\nrecipe {c['recipe']}, budget {c['budget']}, K = {c['replicates']} "
                 "(paired by replicate; band: 95% t)", fontsize=10)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def granularity(recipe):
    """(sort key, label, gradient SR) of a recipe on the elements-per-scale axis."""
    name, _, _ = recipe.partition(":")
    sr = recipe.endswith(":sr") or recipe in ("snip", "nvfp4")
    if recipe == "nvfp4":
        return (16, "nvfp4\n1×16 (16×16 W)", sr)
    if recipe == "mx":
        return (32, "mx\n1×32 E8M0", sr)
    if recipe == "snip":
        return (128, "snip\n1×128 (128² W)", sr)
    if name == "block":
        n = recipe.split(":")[1]
        if n == "row":
            return (10000, "block:row", sr)
        return (int(n), f"block:{n}", sr)
    if name == "channel":
        return (20000, "channel\n(X, dY per tensor)", sr)
    if name == "tensor":
        return (30000, "tensor", sr)
    return (40000, recipe, sr)


def plot_gap_vs_granularity(cs, path):
    pts = [c for c in cs if row(c, "uniform-fp4")]
    if len({checkpoint_name(c) for c in pts}) > 1:  # one model and corpus: the most common checkpoint
        ck = max({checkpoint_name(c) for c in pts}, key=lambda x: sum(checkpoint_name(c) == x for c in pts))
        pts = [c for c in pts if checkpoint_name(c) == ck]
    if len({c["budget"] for c in pts}) > 1:  # one budget: the most common one
        b = max({c["budget"] for c in pts}, key=lambda x: sum(c["budget"] == x for c in pts))
        pts = [c for c in pts if c["budget"] == b]
    steps = max({c["steps"] for c in pts}, key=lambda s: sum(c["steps"] == s for c in pts)) if pts else 0
    pts = [c for c in pts if c["steps"] == steps]
    if len(pts) < 2:
        return False
    pts.sort(key=lambda c: (granularity(c["recipe"])[0], c["recipe"]))
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(pts)), 4.5))
    xs = list(range(len(pts)))
    for which, color, dx in (("uniform-fp4", "tab:purple", -0.08), ("snip", "tab:red", 0.08)):
        ys, es = [], []
        for c in pts:
            r = row(c, "uniform-fp4") if which == "uniform-fp4" else snip_row(c)
            ys.append(r["gap_train_mean"])
            es.append(r["gap_train_ci95"] or 0)
        label = "uniform FP4" if which == "uniform-fp4" else f"SNIP at ρ = {pts[0]['budget']}"
        ax.errorbar([x + dx for x in xs], ys, yerr=es, fmt="o", capsize=3, color=color, label=label)
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xticks(xs)
    labels = []
    for c in pts:
        _, lab, sr = granularity(c["recipe"])
        labels.append(lab + ("\n(SR dY)" if sr else ""))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("train-loss gap to BF16")
    ax.set_xlabel("scaling granularity along the reduction: finer → coarser")
    ax.set_title(f"{steps} steps from step {pts[0]['start_step']}, mean ± 95% half-width, K = {pts[0]['replicates']}",
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def read_steps(path):
    """Train losses by step (and validation losses) of a `snip train --json` log; other lines are skipped."""
    train, val = {}, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            if "step" in j and "train_loss" in j:
                train[j["step"]] = j["train_loss"]
                if j.get("val_loss") is not None:
                    val[j["step"]] = j["val_loss"]
    return train, val


def t_interval(xs):
    k = len(xs)
    m = sum(xs) / k
    if k < 2:
        return m, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (k - 1))
    return m, T95.get(k - 1, 2.0) * sd / math.sqrt(k)


def verdict(mean, hw):
    if mean is None or hw is None:
        return "indistinguishable (no interval)"
    return "worse" if mean - hw > 0 else "better" if mean + hw < 0 else "indistinguishable"


def group_of(label):
    """The group of a --pair label: the text before ": " ("2000 steps: adaptive-snip"), or ""."""
    return label.split(": ", 1)[0] if ": " in label else ""


def paired_runs(specs, out_dir, references=None, window=50):
    """--pair LABEL:REF_LOG:ARM_LOG (repeated, one per seed): the arm's gap to the reference run
    of the same seed (same initial weights and data order), mean over the last `window` steps, and
    the last validation loss; mean ± 95% t over the seeds; one gap_vs_step_paired_runs[_GROUP].png per
    group of labels."""
    groups = {}
    for spec in specs:
        label, ref, arm = spec.rsplit(":", 2)
        groups.setdefault(label, []).append((ref, arm))
    lines, series, all_gaps = [], [], {}
    for label, pairs in groups.items():
        gaps, vgaps, curves = [], [], []
        for ref, arm in pairs:
            rt, rv = read_steps(ref)
            at, av = read_steps(arm)
            steps = sorted(set(rt) & set(at))
            tail = steps[-window:]
            gaps.append(sum(at[s] - rt[s] for s in tail) / len(tail))
            last = max(set(rv) & set(av)) if set(rv) & set(av) else None
            if last is not None:
                vgaps.append(av[last] - rv[last])
            curves.append((steps, running_mean([at[s] - rt[s] for s in steps], 10)))
        all_gaps[label] = (gaps, vgaps)
        m, hw = t_interval(gaps)
        lines += [f"### paired runs: {label} ({len(pairs)} seeds)", "",
                  "| seed pair | gap train (last %d steps) | gap val (last evaluation) |" % window, "|---|---|---|"]
        for (ref, arm), g, v in zip(pairs, gaps, vgaps + [None] * (len(gaps) - len(vgaps))):
            lines.append(f"| {os.path.basename(arm)} − {os.path.basename(ref)} | {g:+.4f} | "
                         f"{'–' if v is None else f'{v:+.4f}'} |")
        vm, vhw = t_interval(vgaps) if vgaps else (None, None)
        lines += [f"| **mean ± 95% t** | **{pm(m, hw)}** | **{pm(vm, vhw)}** |", ""]
        series.append((label, curves))
    for ref_label in references or []:  # each arm of the reference's group against it, paired by seed
        if ref_label not in all_gaps:
            continue
        rg, rv = all_gaps[ref_label]
        lines += [f"### paired runs against {ref_label} (arm − {ref_label}, paired by seed)", "",
                  "| arm | train: mean ± 95% t | verdict | val: mean ± 95% t | verdict |", "|---|---|---|---|---|"]
        for label, (g, v) in all_gaps.items():
            if label == ref_label or group_of(label) != group_of(ref_label):
                continue
            dm, dhw = t_interval([a - b for a, b in zip(g, rg)])
            vm, vhw = t_interval([a - b for a, b in zip(v, rv)]) if v and rv else (None, None)
            lines.append(f"| {label} | {pm(dm, dhw)} | {verdict(dm, dhw)} | {pm(vm, vhw)} | {verdict(vm, vhw)} |")
        lines.append("")
    # One figure per group: per label the mean over seeds of the paired per-step gap, band = 95% t.
    for group in dict.fromkeys(group_of(label) for label, _ in series):
        fig, ax = plt.subplots(figsize=(8, 4.2))
        for label, curves in series:
            if group_of(label) != group:
                continue
            n = min(len(c[1]) for c in curves)
            steps = curves[0][0][:n]
            k = len(curves)
            mean = [sum(c[1][i] for c in curves) / k for i in range(n)]
            line, = ax.plot(steps, mean, lw=1.4, label=label)
            if k >= 2:
                hw = [t_interval([c[1][i] for c in curves])[1] for i in range(n)]
                ax.fill_between(steps, [m - h for m, h in zip(mean, hw)], [m + h for m, h in zip(mean, hw)],
                                color=line.get_color(), alpha=0.12, lw=0)
        ax.axhline(0, color="0.7", lw=0.8)
        ax.set_xlabel("training step")
        ax.set_ylabel("paired train-loss gap (10-step running mean)")
        ax.set_title("runs paired by seed (same initial weights and data order); band: 95% t over seeds", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        suffix = "_" + re.sub(r"[^A-Za-z0-9]+", "_", group).strip("_") if group else ""
        fig.savefig(os.path.join(out_dir, f"gap_vs_step_paired_runs{suffix}.png"), dpi=90)
        plt.close(fig)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="snip show --compare ID --json files, or directories of them")
    ap.add_argument("--out", required=True, help="directory for tables.md and the PNGs")
    ap.add_argument("--curve", action="append", default=[],
                    help="name (file stem) of a compare whose per-step gaps to plot (repeatable; default: the "
                    "first compare with an oracle arm)")
    ap.add_argument("--pair", action="append", default=[],
                    help="LABEL:REF_LOG:ARM_LOG, two `snip train --json` logs of the same seed (repeat per seed): "
                    "the arm's paired gap to the reference run, e.g. adaptive SNIP against BF16 from scratch")
    ap.add_argument("--pair-reference", action="append", default=[],
                    help="LABEL of --pair every other label of its group (the text before \": \") is compared "
                    "with, seed by seed (repeatable: one per group)")
    a = ap.parse_args()
    cs = load(a.inputs)
    if not cs:
        sys.exit("error: no compare JSON found in " + ", ".join(a.inputs))
    os.makedirs(a.out, exist_ok=True)
    lines = []
    for c in cs:
        lines += table(c)
    if a.pair:
        lines += paired_runs(a.pair, a.out, a.pair_reference)
    with open(os.path.join(a.out, "tables.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    made = ["tables.md"]
    if plot_gap_vs_budget(cs, os.path.join(a.out, "gap_vs_budget.png")):
        made.append("gap_vs_budget.png")
    curves = [c for c in cs if c["_name"] in a.curve] if a.curve else [c for c in cs if c.get("regret_vs_oracle")][:1]
    for c in curves:
        png = f"gap_vs_step_{c['_name']}.png"
        plot_gap_vs_step(c, os.path.join(a.out, png))
        made.append(png)
    if plot_gap_vs_granularity(cs, os.path.join(a.out, "gap_vs_granularity.png")):
        made.append("gap_vs_granularity.png")
    print("wrote " + ", ".join(os.path.join(a.out, m) for m in made))


if __name__ == "__main__":
    main()
