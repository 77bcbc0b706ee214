#!/usr/bin/env python3
"""Writes a small conversation trace in the Mooncake trace format (one JSON object per line:
timestamp in ms, input_length and output_length in tokens, hash_ids with one id per 512-token
block), for `make run` and for trying `kvtier bench server --trace` without a real trace.

Conversations start at random times and share one of a few system prompts. Each turn resends the
whole history (system prompt, earlier turns, their answers) plus a new question, so a turn's
leading blocks are the previous turn's: the reuse a KV cache can serve.
"""

import argparse
import json
import random
import sys

BLOCK = 512  # tokens behind one hash id


def conversations(args, rng):
    next_id = 0

    def new_blocks(n):
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    systems = [new_blocks(rng.randint(1, 4)) for _ in range(args.system_prompts)]
    requests = []
    for _ in range(args.conversations):
        history = list(rng.choice(systems))
        t = rng.uniform(0, args.duration_s * 1000)
        for _ in range(rng.randint(1, args.max_turns)):
            history += new_blocks(rng.randint(1, 3))  # the question (and the last answer)
            tail = rng.randint(1, BLOCK)  # the last block is partly filled
            requests.append({"timestamp": int(t), "input_length": (len(history) - 1) * BLOCK + tail,
                             "output_length": rng.randint(50, 800), "hash_ids": list(history)})
            t += rng.expovariate(1 / args.think_ms)
    requests.sort(key=lambda r: r["timestamp"])
    return requests


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=40)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--system-prompts", type=int, default=4)
    ap.add_argument("--duration-s", type=float, default=60, help="conversations start within this")
    ap.add_argument("--think-ms", type=float, default=8000, help="mean gap between turns")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default="-", help="file to write (default: stdout)")
    args = ap.parse_args()
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    with out:
        for r in conversations(args, random.Random(args.seed)):
            out.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
