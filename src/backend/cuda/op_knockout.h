// DS4_CUDA_KNOCKOUT=PATTERN[,PATTERN...]: the CUDA ops whose name, or whose
// weight's name, contains one of the patterns are skipped, their outputs
// zeroed instead (one memset node), so the replayed step's device time
// without them says what they cost inside the graph, which ncu's per-kernel
// durations do not (a kernel measured alone pays its own ramp and drain; in
// a replay the next one is already waiting: bench/NOTES.md, 2026-12-07 fifth
// session). Results are wrong while it is set: for benchmarks only. Zeros
// keep the rest finite and in range (a zeroed router routes uniformly, zero
// logits sample token 0). A pattern "=NAME" matches NAME whole
// ("=output.weight": the head, not every "attn_output.weight"). Names: a
// weight's ("attn_q.", "ffn_gate_inp" (not in the fused
// router_softmax_topk), "=output.weight", ...), "attention", "rms_norm"
// (with add_rms_norm), "kv_store", "qk_norm_rope", "split", "moe".
#pragma once

#include <string_view>

namespace ds4::cuda {

// Whether an op named `what` is knocked out (read once from the environment).
bool knocked_out(std::string_view what);
// The patterns, or "" when none are set.
const char* knockout_patterns();

}  // namespace ds4::cuda
