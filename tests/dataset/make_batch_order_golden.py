#!/usr/bin/env python3
"""Independent implementation of BatchLoader's shuffle (engine/data/include/snip/dataset.h):
splitmix64 seeded by (seed, epoch), Fisher-Yates over W windows. Writes the order of the first
windows for a few (seed, epoch) pairs to data/batch_order.json, which test_dataset compares
against, so the data order can never drift silently between builds (resume would break).
Run: python3 tests/dataset/make_batch_order_golden.py"""
import json
import os

M = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return state, z ^ (z >> 31)


def uniform_below(state, n):
    limit = M - (M % n)  # UINT64_MAX - UINT64_MAX % n
    while True:
        state, r = splitmix64(state)
        if r < limit:
            return state, r % n


def epoch_order(seed, epoch, windows):
    state, first = splitmix64(seed)
    state = first ^ ((epoch * 0xD1B54A32D192ED03) & M)
    order = list(range(windows))
    for i in range(windows, 1, -1):
        state, j = uniform_below(state, i)
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


cases = []
for seed, epoch, windows in [(1337, 0, 1000), (1337, 1, 1000), (0, 0, 97), (2**64 - 1, 5, 4096)]:
    cases.append({"seed": str(seed), "epoch": epoch, "windows": windows, "order": epoch_order(seed, epoch, windows)[:64]})
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "batch_order.json")
with open(out, "w") as f:
    json.dump({"cases": cases}, f, indent=1)
print("wrote", out)
