#!/usr/bin/env python3
"""The side-by-side table of bench/vs-llama.sh, and the weight-bytes estimate it falls back on.

  vs_llama_table.py table --bandwidth BW.json --case NAME LLAMA.json DS4.json [--case ...]
                          [--touched NAME TOUCHED.json] [--md FILE]
  vs_llama_table.py touched-bytes FILE.gguf [--json FILE]

table: one markdown table, rows pp512, pp4096, tg128 @ d512 (and llama.cpp's own tg128 at depth 0) per case.
  LLAMA.json is `llama-bench -o json` output; DS4.json is `ds4-bench --json` output
  ({"weights_bytes_per_token": N, "rows": [{"ctx", "prefill_tps", "gen_tps", "kv_bytes"}]}) or its CSV
  (ctx,prefill_tps,gen_tps,kv_bytes). "-" stands for a missing side. BW.json is bench/bandwidth.py output.
  Roofline fraction (tg rows) = t/s x weights bytes per decoded token / measured read bandwidth. The bytes come
  from ds4-bench's JSON when it has them, else from the touched-bytes estimate given with --touched.
touched-bytes: bytes of weights one decoded token reads, from the GGUF tensor table alone: every tensor once,
  routed-expert tensors (*_exps) scaled by expert_used_count / expert_count, and only one row of token_embd
  (unless there is no output.weight, when the embedding doubles as the output head). Block sizes come from
  llama.cpp's gguf-py (GGML_QUANT_SIZES), not from ds4.
Exit status: 0 ok, 1 unreadable input (one line on stderr), 2 bad command line.
"""
import argparse
import csv
import importlib.util
import json
import os
import struct
import sys


class InputError(Exception):
    """Bad or missing input file: reported as one line, exit 1."""


# ---------------------------------------------------------------------------------------------------------------
# Loading the two engines' outputs

def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror}.")
    except json.JSONDecodeError as e:
        raise InputError(f"{what} {path} is not JSON ({e.msg} at line {e.lineno}).")


def llama_results(path):
    """llama-bench -o json: a list of test objects. Returns {(n_prompt, n_gen, n_depth): entry}."""
    data = load_json(path, "llama-bench output")
    if not isinstance(data, list):
        raise InputError(f"llama-bench output {path} is not a JSON list of tests.")
    out = {}
    for t in data:
        try:
            key = (int(t["n_prompt"]), int(t["n_gen"]), int(t.get("n_depth", 0)))
            out[key] = {"tps": float(t["avg_ts"]), "stddev": float(t.get("stddev_ts", 0.0)),
                        "flash_attn": t.get("flash_attn"), "model_type": t.get("model_type", ""),
                        "gpu_info": t.get("gpu_info", ""), "build_commit": t.get("build_commit", "")}
        except (KeyError, TypeError, ValueError):
            raise InputError(f"llama-bench output {path} has a test without n_prompt/n_gen/avg_ts.")
    return out


def ds4_results(path):
    """ds4-bench --json (preferred) or --csv. Returns (rows by ctx, weights_bytes_per_token or None, the products
    that made the numbers: "cpu", "fp32" or "f16" prefill, or None when the output does not say)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"cannot read ds4-bench output {path}: {e.strerror}.")
    rows, wbpt, products = {}, None, None
    if text.lstrip().startswith("{"):
        data = load_json(path, "ds4-bench output")
        wbpt = data.get("weights_bytes_per_token")
        products = data.get("prefill_products")
        raw = data.get("rows")
        if not isinstance(raw, list):
            raise InputError(f"ds4-bench output {path} has no \"rows\" list.")
    else:
        raw = list(csv.DictReader(text.splitlines()))
    for r in raw:
        try:
            rows[int(r["ctx"])] = {"prefill_tps": float(r["prefill_tps"]), "gen_tps": float(r["gen_tps"])}
        except (KeyError, TypeError, ValueError):
            raise InputError(f"ds4-bench output {path} has a row without ctx/prefill_tps/gen_tps.")
    if not rows:
        raise InputError(f"ds4-bench output {path} has no rows.")
    return rows, (float(wbpt) if wbpt else None), (str(products) if products else None)


# ---------------------------------------------------------------------------------------------------------------
# The table

# Test name -> (llama-bench key (n_prompt, n_gen, n_depth), ds4 frontier, ds4 field). ds4-bench runs
# --ctx-start 512 --ctx-max 4096 --step-mul 8 --gen-tokens 128: frontier 512 prefills 512 tokens from an empty
# context (pp512); frontier 4096 prefills the 3584 tokens from depth 512 to 4096 (closest to pp4096); its
# generation probe at frontier 512 decodes 128 tokens after 512 of context, so llama-bench runs tg128 at
# depth 512 (-d 512) as well, and both engines decode at the same depth.
TESTS = [
    ("pp512", (512, 0, 0), 512, "prefill_tps"),
    ("pp4096", (4096, 0, 0), 4096, "prefill_tps"),
    ("tg128 @ d512", (0, 128, 512), 512, "gen_tps"),
    ("tg128", (0, 128, 0), None, None),  # llama-bench's standard test; ds4-bench has no depth-0 probe
]


def fmt_tps(v):
    return "—" if v is None else f"{v:.2f}"


def fmt_pct(v):
    if v is None:
        return "—"
    return f"{100.0 * v:.1f} %" if v >= 0.01 else f"{100.0 * v:.3f} %"  # tiny test models stay readable


def case_rows(name, llama, ds4, wbpt, bw_bytes_per_s):
    """Rows of one model: dicts with the numbers (None where a side is missing)."""
    rows = []
    for test, lkey, ctx, field in TESTS:
        l = llama.get(lkey) if llama else None
        d = ds4[ctx][field] if (ds4 and ctx in ds4) else None
        if l is None and d is None:
            continue
        lt = l["tps"] if l else None
        row = {"model": name, "test": test, "llama": lt, "ds4": d,
               "ratio": (d / lt) if (d is not None and lt) else None, "llama_roof": None, "ds4_roof": None}
        if test.startswith("tg") and wbpt and bw_bytes_per_s:
            row["llama_roof"] = lt * wbpt / bw_bytes_per_s if lt is not None else None
            row["ds4_roof"] = d * wbpt / bw_bytes_per_s if d is not None else None
        rows.append(row)
    return rows


def render(rows, notes):
    head = ("| model | test | llama.cpp t/s | ds4 t/s | ds4 / llama | llama.cpp roofline | ds4 roofline |\n"
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
    body = "".join(
        f"| {r['model']} | {r['test']} | {fmt_tps(r['llama'])} | {fmt_tps(r['ds4'])} | "
        f"{'—' if r['ratio'] is None else format(r['ratio'], '.2f') + '×'} | "
        f"{fmt_pct(r['llama_roof'])} | {fmt_pct(r['ds4_roof'])} |\n" for r in rows)
    return head + body + "".join(f"\n- {n}" for n in notes) + ("\n" if notes else "")


def cmd_table(a):
    bw = load_json(a.bandwidth, "bandwidth result")
    try:
        bw_gbps = float(bw["read_gbps"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"bandwidth result {a.bandwidth} has no read_gbps.")
    if bw_gbps <= 0:
        raise InputError(f"bandwidth result {a.bandwidth} has a non-positive read_gbps.")
    touched = {}
    for name, path in a.touched or []:
        t = load_json(path, "touched-bytes estimate")
        if "weights_bytes_per_token" not in t:
            raise InputError(f"touched-bytes estimate {path} has no weights_bytes_per_token.")
        touched[name] = float(t["weights_bytes_per_token"])
    rows = []
    notes = [f"Measured HBM read bandwidth: {bw_gbps:.0f} GB/s ({bw.get('device', 'GPU')}). Roofline = t/s × "
             "weight bytes per decoded token ÷ that bandwidth (tg rows)."]
    for name, lpath, dpath in a.case:
        llama = llama_results(lpath) if lpath != "-" else None
        ds4, wbpt, products = ds4_results(dpath) if dpath != "-" else (None, None, None)
        source = "ds4-bench"
        if wbpt is None and name in touched:
            wbpt, source = touched[name], "GGUF tensor table (touched-bytes estimate)"
        if wbpt:
            notes.append(f"{name}: {wbpt / 1e9:.3f} GB of weights per decoded token, from {source}.")
        else:
            notes.append(f"{name}: no weight bytes per token, so no roofline.")
        if llama:
            fa = sorted({str(v["flash_attn"]) for v in llama.values()})
            notes.append(f"{name}: llama.cpp flash_attn={','.join(fa)}, build {next(iter(llama.values()))['build_commit']}.")
        if llama is None:
            notes.append(f"{name}: no llama.cpp result.")
        if ds4 is None:
            notes.append(f"{name}: no ds4 result.")
        elif products:
            what = {"f16": "f16 tensor cores, f32 sums", "fp32": "FP32 (--exact)", "cpu": "the CPU"}.get(products, products)
            notes.append(f"{name}: ds4 prefill products on {what}.")
        rows += case_rows(name, llama, ds4, wbpt, bw_gbps * 1e9)
    text = render(rows, notes)
    sys.stdout.write(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)


# ---------------------------------------------------------------------------------------------------------------
# touched-bytes: a GGUF tensor table reader (header only; the data is never read)

def quant_sizes():
    """GGML_QUANT_SIZES from llama.cpp's gguf-py constants.py, loaded alone (gguf/__init__ needs numpy)."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("GGUF_PY", "")]
    deps = os.environ.get("DS4_DEPS_DIR", os.path.join(here, "..", ".deps"))
    candidates += [os.path.join(deps, "oracle", "llama.cpp", "gguf-py")]
    for c in candidates:
        path = os.path.join(c, "gguf", "constants.py")
        if c and os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("gguf_constants", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return {int(k): v for k, v in mod.GGML_QUANT_SIZES.items()}
    raise InputError("llama.cpp's gguf-py was not found (set GGUF_PY to its folder).")


class Reader:
    def __init__(self, f, path):
        self.f, self.path = f, path

    def take(self, fmt):
        n = struct.calcsize(fmt)
        b = self.f.read(n)
        if len(b) != n:
            raise InputError(f"{self.path} ends inside its GGUF header.")
        return struct.unpack("<" + fmt, b)[0]

    def string(self):
        n = self.take("Q")
        if n > 1 << 30:
            raise InputError(f"{self.path} has an implausible string length in its GGUF header.")
        b = self.f.read(n)
        if len(b) != n:
            raise InputError(f"{self.path} ends inside its GGUF header.")
        return b.decode("utf-8", "replace")

    SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(self, vtype):
        if vtype in self.SCALARS:
            return self.take(self.SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype, n = self.take("I"), self.take("Q")
            if etype in self.SCALARS:  # skip bulk arrays (vocabularies) without decoding them one by one
                size = struct.calcsize(self.SCALARS[etype])
                self.f.seek(n * size, os.SEEK_CUR)
                return None
            return [self.value(etype) for _ in range(n)] if etype != 8 else [self.string() for _ in range(n)]
        raise InputError(f"{self.path} has an unknown GGUF value type {vtype}.")


def read_tensor_table(path):
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}.")
    with f:
        r = Reader(f, path)
        if f.read(4) != b"GGUF":
            raise InputError(f"{path} is not a GGUF file (no GGUF magic).")
        version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
        if version < 2 or n_tensors > 1 << 24 or n_kv > 1 << 24:
            raise InputError(f"{path} has an unsupported GGUF header (version {version}).")
        kv = {}
        for _ in range(n_kv):
            key = r.string()
            kv[key] = r.value(r.take("I"))
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            nd = r.take("I")
            if nd > 8:
                raise InputError(f"{path}: tensor {name} has {nd} dimensions.")
            dims = [r.take("Q") for _ in range(nd)]
            ttype, _offset = r.take("I"), r.take("Q")
            tensors.append((name, dims, ttype))
    return kv, tensors


def touched_bytes(path):
    sizes = quant_sizes()
    kv, tensors = read_tensor_table(path)
    arch = kv.get("general.architecture")
    n_expert, n_used = kv.get(f"{arch}.expert_count"), kv.get(f"{arch}.expert_used_count")
    names = {t[0] for t in tensors}
    # GLM-5's multi-token-prediction blocks (the last nextn_predict_layers of block_count) are loaded and not run.
    n_block, n_nextn = kv.get(f"{arch}.block_count"), kv.get(f"{arch}.nextn_predict_layers") or 0
    mtp = {f"blk.{i}." for i in range(n_block - n_nextn, n_block)} if n_block and n_nextn else set()
    total = touched = experts = 0
    for name, dims, ttype in tensors:
        if ttype not in sizes:
            raise InputError(f"{path}: tensor {name} has ggml type {ttype}, unknown to gguf-py.")
        block, tsize = sizes[ttype]
        n = 1
        for d in dims:
            n *= d
        if dims[0] % block:
            raise InputError(f"{path}: tensor {name} has rows of {dims[0]}, not a multiple of its block {block}.")
        nbytes = n // block * tsize
        total += nbytes
        if any(name.startswith(p) for p in mtp):
            continue
        if "_exps" in name and n_expert and n_used:
            experts += nbytes
            touched += nbytes * n_used / n_expert
        elif name == "token_embd.weight" and "output.weight" in names and len(dims) >= 2:
            touched += nbytes / dims[1]  # one embedding row per token
        else:
            touched += nbytes
    return {"file": os.path.basename(path), "architecture": arch, "expert_count": n_expert,
            "expert_used_count": n_used, "tensor_bytes": total, "routed_expert_bytes": experts,
            "weights_bytes_per_token": int(round(touched))}


def cmd_touched(a):
    out = json.dumps(touched_bytes(a.gguf), indent=1)
    print(out)
    if a.json:
        with open(a.json, "w") as f:
            f.write(out + "\n")


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like the rest of ds4's tools
        sys.stderr.write(f"vs_llama_table.py: {message} (see --help)\n")
        sys.exit(2)


def main():
    p = Parser(description="side-by-side table of llama-bench and ds4-bench results",
               formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = p.add_subparsers(dest="cmd", parser_class=Parser)
    t = sub.add_parser("table", help="print the markdown table")
    t.add_argument("--bandwidth", required=True, help="bench/bandwidth.py JSON")
    t.add_argument("--case", nargs=3, action="append", required=True, metavar=("NAME", "LLAMA_JSON", "DS4_JSON"))
    t.add_argument("--touched", nargs=2, action="append", metavar=("NAME", "TOUCHED_JSON"))
    t.add_argument("--md", help="also write the table here")
    b = sub.add_parser("touched-bytes", help="weight bytes per decoded token of a GGUF file")
    b.add_argument("gguf")
    b.add_argument("--json")
    a = p.parse_args()
    if a.cmd is None:
        p.error("a command is required: table or touched-bytes")
    try:
        cmd_table(a) if a.cmd == "table" else cmd_touched(a)
    except InputError as e:
        sys.stderr.write(f"vs_llama_table.py: {e}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
