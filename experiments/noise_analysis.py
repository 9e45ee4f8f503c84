#!/usr/bin/python3
"""The gradient-noise experiment of REGIMES.md ("Where FP4 stops helping"), from its data.

    /usr/bin/python3 experiments/noise_analysis.py [--db DB] DATA

DATA holds runs/<name>.jsonl (the step lines of `snip train --json`, as experiments/regimes/run.sh
writes them) and ratios/<name>.csv (step,layer,precision,ratio: every statistics round's gradient
noise ratio, METHOD.md section 10). With --db, the ratios are first exported from the database the
runs were recorded in. Prints the tables REGIMES.md quotes: each arm's end-of-run gap to BF16 and
its paired difference to adaptive SNIP (mean ± 95% Student-t interval over the seeds), the FP4
fraction and re-plans of each arm, and per statistics round how many layers are below sqrt(3)
next to uniform FP4's gap to BF16 at that step.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import sqlite3
import statistics

SQRT3 = math.sqrt(3.0)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}
NAME = re.compile(r"^(?P<preset>\w+)-scratch-(?P<steps>\d+)steps-(?P<arm>.+)-seed(?P<seed>\d+)$")
ARMS = ["bf16", "uniform-fp4", "adaptive-snip", "adaptive-snip-noise", "adaptive-snip-floor"]


def interval(values):
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    return mean, T975[n - 1] * statistics.stdev(values) / math.sqrt(n)


def fmt(values):
    mean, half = interval(values)
    return f"{mean:+.3f} ± {half:.3f}" if math.isfinite(half) else f"{mean:+.3f}"


def export_ratios(db, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    for run_id, name in con.execute("SELECT id, name FROM runs"):
        rows = con.execute(
            "SELECT r.step, l.name, v.precision, v.value FROM stats_rounds r JOIN stats_values v ON v.round_id = r.id "
            "JOIN stats_layers l ON l.round_id = r.id AND l.position = v.position "
            "WHERE r.run_id = ? AND v.key = 'grad_noise_ratio' ORDER BY r.step, v.position, v.precision",
            (run_id,),
        ).fetchall()
        # Re-solves (a plan the noise rule kept says "replanned": false) and changes of assignment.
        timeline = con.execute(
            "SELECT p.id, json_extract(p.provenance, '$.replanned') FROM plan_timeline t JOIN plans p ON p.id = t.plan_id "
            "WHERE t.run_id = ? ORDER BY t.first_step",
            (run_id,),
        ).fetchall()
        solves = sum(1 for _, replanned in timeline if replanned is None or replanned)
        changes, previous = 0, None
        for plan_id, _ in timeline:
            layers = con.execute(
                "SELECT layer, role, precision FROM plan_assignments WHERE plan_id = ? ORDER BY layer, role", (plan_id,)
            ).fetchall()
            changes += previous is not None and layers != previous
            previous = layers
        if not rows:
            continue
        with open(os.path.join(out_dir, f"{name}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "layer", "precision", "ratio", "solves_in_run", "plan_changes_in_run"])
            for step, layer, prec, value in rows:
                w.writerow([step, layer, prec, repr(value), solves, changes])


def load(data):
    runs = {}
    for path in glob.glob(os.path.join(data, "runs", "*.jsonl")):
        name = os.path.basename(path)[: -len(".jsonl")]
        m = NAME.match(name)
        if not m:
            continue
        lines = [json.loads(x) for x in open(path)]
        key = (m["preset"], int(m["steps"]))
        runs.setdefault(key, {}).setdefault(m["arm"], {})[int(m["seed"])] = {"lines": lines, "name": name}
    for key, arms in runs.items():
        for arm, seeds in arms.items():
            for seed, run in seeds.items():
                path = os.path.join(data, "ratios", run["name"] + ".csv")
                run["ratios"] = list(csv.DictReader(open(path))) if os.path.exists(path) else []
    return runs


def end_losses(run, window=50):
    lines = run["lines"]
    train = [x["train_loss"] for x in lines[-window:]]
    val = [x["val_loss"] for x in lines if "val_loss" in x]
    return sum(train) / len(train), val[-1]


def gap_at(arms, step, window=50):
    """Uniform FP4's train-loss gap to BF16 over the `window` steps ending at `step`, per seed."""
    out = []
    for seed in sorted(arms["bf16"]):
        if seed not in arms.get("uniform-fp4", {}):
            continue
        b = {x["step"]: x["train_loss"] for x in arms["bf16"][seed]["lines"]}
        u = {x["step"]: x["train_loss"] for x in arms["uniform-fp4"][seed]["lines"]}
        steps = [s for s in range(max(1, step - window + 1), step + 1) if s in b and s in u]
        if steps:
            out.append(sum(u[s] - b[s] for s in steps) / len(steps))
    return out


def report(runs):
    for (preset, steps), arms in sorted(runs.items()):
        if "adaptive-snip-noise" not in arms:
            continue
        seeds = sorted(set.intersection(*(set(arms[a]) for a in ARMS if a in arms)))
        print(f"\n### `{preset}`, {steps} steps from scratch, seeds {', '.join(map(str, seeds))}\n")
        print("| arm | mean FP4 fraction | solves / plan changes (per seed) | train gap to BF16 | val gap to BF16 | "
              "train vs adaptive SNIP | val vs adaptive SNIP |")
        print("|---|---|---|---|---|---|---|")
        base = {s: end_losses(arms["bf16"][s]) for s in seeds}
        ref = {s: end_losses(arms["adaptive-snip"][s]) for s in seeds}
        for arm in ARMS:
            if arm not in arms:
                continue
            ends = {s: end_losses(arms[arm][s]) for s in seeds}
            fp4 = [statistics.mean(x.get("fp4_fraction", 0) for x in arms[arm][s]["lines"]) for s in seeds]
            plans = [
                f"{arms[arm][s]['ratios'][0]['solves_in_run']}/{arms[arm][s]['ratios'][0]['plan_changes_in_run']}"
                for s in seeds
                if arms[arm][s]["ratios"]
            ]
            gap_t = [ends[s][0] - base[s][0] for s in seeds]
            gap_v = [ends[s][1] - base[s][1] for s in seeds]
            vs_t = [ends[s][0] - ref[s][0] for s in seeds]
            vs_v = [ends[s][1] - ref[s][1] for s in seeds]
            same = arm == "adaptive-snip"
            print(f"| {arm} | {statistics.mean(fp4):.3f} | {', '.join(plans) if plans else '—'} | "
                  f"{fmt(gap_t)} | {fmt(gap_v)} | {'reference' if same else fmt(vs_t)} | "
                  f"{'reference' if same else fmt(vs_v)} |")
        # The monitor against uniform FP4's gap: per round step, layers below sqrt(3) in the
        # adaptive SNIP runs (mean over seeds, of how many) and the smallest ratio.
        rounds = {}
        for s in seeds:
            for row in arms["adaptive-snip"][s]["ratios"]:
                if row["precision"] != "fp4":
                    continue
                rounds.setdefault(int(row["step"]), {}).setdefault(s, []).append(float(row["ratio"]))
        print("\n| round step | FP4 layers below √3 (per seed) | smallest FP4 ratio | median FP4 ratio | "
              "uniform FP4 gap to BF16 (train, 50 steps before) |")
        print("|---|---|---|---|---|")
        for step in sorted(rounds):
            per_seed = rounds[step]
            below = [sum(r < SQRT3 for r in per_seed[s]) for s in sorted(per_seed)]
            layers = len(next(iter(per_seed.values())))
            smallest = min(min(v) for v in per_seed.values())
            median = statistics.median([r for v in per_seed.values() for r in v])
            gap = gap_at(arms, step) if step > 0 else []
            print(f"| {step} | {'/'.join(map(str, below))} of {layers} | {smallest:.2f} | {median:.2f} | "
                  f"{fmt(gap) if gap else '—'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--db", help="export DATA/ratios/*.csv from this database first")
    a = ap.parse_args()
    if a.db:
        export_ratios(a.db, os.path.join(a.data, "ratios"))
    report(load(a.data))


if __name__ == "__main__":
    main()
