#!/usr/bin/env python3
"""Plants a greedy reply in a random-weight F32 GGUF model, in place: after
token ids[0] the model's most likely next token becomes ids[1], after ids[1]
ids[2], and so on (a bigram chain through the real forward pass).

A random model never writes a tool call of its own, and a test that wants
one live (the server reading the call, remembering its sampled text, the
next turn reusing its KV) needs a model that does. The chain's tokens get
their embedding rows scaled up, so at their positions the residual stream is
their embedding whatever the layers add (every layer reads it through an
RMS norm, which the scale does not change); the output head's row of each
successor gets the direction the final norm gives that embedding, so its
logit stands far above the random others. Each token of the chain must have
one successor (a token repeated with two different successors cannot be
planted: refused).

usage: plant_reply.py MODEL.gguf ID0 ID1 ... IDn
"""
import math
import mmap
import struct
import sys

SCALE = 200.0  # embedding rows of the chain: x SCALE
GAIN = 40.0    # a planted successor's logit: ~GAIN x an output row's norm x |h|


def read_gguf_tensors(m):
    """{name: (type, dims, absolute offset)} of a GGUF file's tensors."""
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, m, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = bytes(m[pos:pos + n])
        pos += n
        return s

    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def skip_value(t):
        nonlocal pos
        if t == 8:
            string()
        elif t == 9:
            et, n = take("I"), take("Q")
            if et in sizes:
                pos += n * struct.calcsize("<" + sizes[et])
            else:
                for _ in range(n):
                    skip_value(et)
        else:
            take(sizes[t])

    if bytes(m[0:4]) != b"GGUF":
        sys.exit("not a GGUF file")
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    alignment = 32
    for _ in range(n_kv):
        key = string()
        t = take("I")
        if key == b"general.alignment":
            alignment = take("I")
        else:
            skip_value(t)
    infos = []
    for _ in range(n_tensors):
        name = string().decode()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, take("I"), dims, take("Q")))
    data = (pos + alignment - 1) // alignment * alignment
    return {name: (t, dims, data + off) for name, t, dims, off in infos}


def main():
    path, ids = sys.argv[1], [int(x) for x in sys.argv[2:]]
    successor = {}
    for a, b in zip(ids, ids[1:]):
        if successor.setdefault(a, b) != b:
            sys.exit(f"token {a} is followed by both {successor[a]} and {b}: a bigram chain cannot plant that")
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
        tensors = read_gguf_tensors(m)
        for name in ("token_embd.weight", "output.weight", "output_norm.weight"):
            if name not in tensors or tensors[name][0] != 0:
                sys.exit(f"{name} must be an F32 tensor")
        d = tensors["token_embd.weight"][1][0]

        def row(name, i):
            off = tensors[name][2] + i * d * 4
            return off, list(struct.unpack_from(f"<{d}f", m, off))

        g = row("output_norm.weight", 0)[1]
        row_norm = math.sqrt(sum(x * x for x in row("output.weight", 0)[1]))
        for a, b in successor.items():
            off, e = row("token_embd.weight", a)
            rms = math.sqrt(sum(x * x for x in e) / d)
            h = [x / rms * w for x, w in zip(e, g)]  # what the final norm makes of this embedding
            hn = math.sqrt(sum(x * x for x in h))
            struct.pack_into(f"<{d}f", m, off, *[x * SCALE for x in e])
            off, w = row("output.weight", b)
            struct.pack_into(f"<{d}f", m, off, *[x + GAIN * row_norm * y / hn for x, y in zip(w, h)])
        m.flush()


if __name__ == "__main__":
    main()
