#!/usr/bin/env python3
"""HBM bandwidth of GPU 0, measured the way a decode step uses memory: one pass that reads a buffer far larger
than L2 (a sum), and a device-to-device copy (read + write) for comparison. Median of timed repetitions with
CUDA events, after warm-up. Prints one JSON object; `read_gbps` is the roofline's denominator in vs-llama.sh.

usage: bandwidth.py [--gib N] [--reps N] [--json FILE]
"""
import argparse
import json
import statistics
import sys


def main():
    p = argparse.ArgumentParser(description="HBM read/copy bandwidth of GPU 0 (torch, CUDA events)")
    p.add_argument("--gib", type=float, default=4.0, help="buffer size in GiB (default 4, ~70x the H200's L2)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions (default 20)")
    p.add_argument("--json", help="also write the JSON object to this file")
    a = p.parse_args()
    if a.gib <= 0 or a.reps < 1:
        sys.exit("bandwidth.py: --gib must be > 0 and --reps >= 1.")
    try:
        import torch
    except ImportError:
        sys.exit("bandwidth.py: PyTorch is not installed here, so the bandwidth cannot be measured.")
    if not torch.cuda.is_available():
        sys.exit("bandwidth.py: no CUDA device is visible.")

    n = int(a.gib * (1 << 30)) // 4
    x = torch.ones(n, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    nbytes = n * 4

    def timed(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        ms = []
        for _ in range(a.reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ms.append(s.elapsed_time(e))
        return statistics.median(ms)

    read_ms = timed(lambda: x.sum())
    copy_ms = timed(lambda: y.copy_(x))
    out = {
        "device": torch.cuda.get_device_name(0),
        "buffer_bytes": nbytes,
        "reps": a.reps,
        "read_gbps": nbytes / (read_ms * 1e-3) / 1e9,
        "copy_gbps": 2 * nbytes / (copy_ms * 1e-3) / 1e9,  # bytes read + bytes written
        "method": "torch sum (read) and copy_ (read+write), median of CUDA-event timings",
    }
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
