// Command line of the `ds4` program: parsing and complete validation.
//
// parse_ds4_options() checks everything that can be checked before a model
// is loaded: unknown flags, missing or malformed values, ranges, that the
// named files exist, and combinations that contradict each other. Each
// problem becomes a ds4::UsageError with ONE line naming the flag
// ("--top-p must be in (0, 1], got 1.5"); the caller prints
// "ds4: <message>" and exits with status 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/cli_values.h"
#include "cli/pipeline_flags.h"
#include "cli/ssd_flags.h"
#include "common/layer_range.h"

namespace ds4 {

// Upper bound for --ctx, --prefill-chunk and -n: far beyond any model's
// trained context (DeepSeek V4: 1M), low enough that sizes never overflow.
constexpr int kMaxContext = 1 << 24;
constexpr int kMaxThreads = 4096;

// The pipeline flags (layers, role, addresses, key, ...) are the base.
struct Ds4Options : PipelineFlags {
    // Model and execution.
    std::string model = "./ds4flash.gguf";  // -m/--model
    std::string backend = "auto";           // --backend auto|cpu|cuda
    int threads = 1;                        // -t/--threads; default: hardware concurrency
    int ctx = 4096;                         // -c/--ctx: context length in tokens
    int prefill_chunk = 4096;               // --prefill-chunk: prompt tokens per forward pass
    bool check_tensors = false;             // --check-tensors: read every weight, fail on NaN/inf

    // Input. At most one of prompt / prompt_file / token_ids_file; none of
    // them means an interactive chat.
    std::string prompt;          // -p/--prompt (has_prompt tells "" from absent)
    bool has_prompt = false;
    std::string prompt_file;     // --prompt-file
    std::string system;          // -sys/--system: system message for the chat template
    bool think = true;           // --think (default) / --nothink
    bool think_max = false;      // --think-max: maximum reasoning effort where the template has it
    std::string chat_template;   // --chat-template NAME (a renderer or "raw"); "" = the model's own
    std::string token_ids_file;  // --token-ids FILE: raw token ids (whitespace separated), no template
    std::string dump_logits_file;  // --dump-logits OUT: logits of every position of --token-ids

    // Generation and sampling.
    int n_predict = -1;     // -n/--tokens/--n-predict; -1 = until end of generation or full context
    float temp = 0.6f;      // --temp; 0 = greedy
    float top_p = 0.95f;    // --top-p in (0, 1]; 1 = off
    float min_p = 0.0f;     // --min-p in [0, 1]; 0 = off
    int top_k = 40;         // --top-k; 0 = off
    std::optional<uint64_t> seed;  // --seed; absent = random

    // Routed experts streamed from SSD (--ssd-streaming and its flags).
    SsdStreaming ssd;
    bool cuda_host_weights = false;                   // --cuda-host-weights
    bool int8_activations = false;                    // --int8-activations
    bool exact = false;                               // --exact (FP32 CUDA prefill)

    // Information requests: when set, nothing else was validated.
    bool help = false;     // -h/--help: print ds4_help_text() and exit 0
    bool version = false;  // --version
};

// Parses and validates argv (argv[0] is the program name). Throws
// ds4::UsageError with one line on any problem.
Ds4Options parse_ds4_options(int argc, const char* const* argv);
inline Ds4Options parse_ds4_options(int argc, char** argv) {
    return parse_ds4_options(argc, const_cast<const char* const*>(argv));
}

// The text printed for --help (lists every flag, the backends cpu and cuda,
// and the --layers forms).
std::string ds4_help_text();

}  // namespace ds4
