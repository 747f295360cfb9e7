// llama_logits -m MODEL --token-ids FILE --dump-logits OUT [-t THREADS]
//              [--selection-margins OUT] [--gpu]
//
// The reference side of ds4's differential interface: evaluates the
// whitespace-separated token ids in FILE exactly as given (no BOS, no
// template) with llama.cpp's library on the CPU, in ONE decode so every
// position has logits, and writes them as float32 little-endian,
// n_tokens x n_vocab, row-major, the same format as `ds4 --dump-logits`.
//
// The KV cache is F32 and flash attention is off so that llama.cpp's only
// rounding on an F32 model is its float32 arithmetic (an F16 cache alone would
// move the logits by ~1e-3, ten times the F32 tolerance).
//
// --selection-margins OUT also writes, per position, how near llama.cpp came
// to a different top-k choice in this very run (llama_selection_margins.h).
//
// --gpu: llama.cpp as its users run it on a GPU instead (every layer
// offloaded, its default KV cache type and flash-attention choice, batches of
// its default 512 tokens): the other side of issue 13's accuracy comparison,
// llama.cpp's own error against an F32 reference. Built against a CUDA build
// of llama.cpp for that (bench/cuda-accuracy.sh); with the CPU-only oracle
// library it changes only the cache, attention and batch settings.
#include "llama_selection_margins.h"

#include <ggml-backend.h>
#include <llama.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
    std::string model;
    std::string token_ids;
    std::string dump_logits;
    std::string selection_margins;
    int threads = 0;
    bool gpu = false;
};

[[noreturn]] void usage_error(const std::string& sentence) {
    std::fprintf(stderr, "llama_logits: %s\n", sentence.c_str());
    std::fprintf(stderr, "usage: llama_logits -m MODEL --token-ids FILE --dump-logits OUT [-t THREADS] "
                         "[--selection-margins OUT] [--gpu]\n");
    std::exit(1);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage_error("option " + a + " needs a value.");
            return argv[++i];
        };
        if (a == "-m" || a == "--model") {
            o.model = value();
        } else if (a == "--token-ids") {
            o.token_ids = value();
        } else if (a == "--dump-logits") {
            o.dump_logits = value();
        } else if (a == "--gpu") {
            o.gpu = true;
        } else if (a == "--selection-margins") {
            o.selection_margins = value();
        } else if (a == "-t" || a == "--threads") {
            const std::string v = value();
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0' || n < 1 || n > 1024) {
                usage_error("thread count '" + v + "' is not a number from 1 to 1024.");
            }
            o.threads = static_cast<int>(n);
        } else {
            usage_error("unknown argument '" + a + "'.");
        }
    }
    if (o.model.empty()) usage_error("missing -m MODEL.");
    if (o.token_ids.empty()) usage_error("missing --token-ids FILE.");
    if (o.dump_logits.empty()) usage_error("missing --dump-logits OUT.");
    if (o.threads == 0) {
        o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }
    return o;
}

std::vector<llama_token> read_token_ids(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open token id file " + path + ": " + std::strerror(errno));
    std::vector<llama_token> ids;
    std::string word;
    while (in >> word) {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(word.c_str(), &end, 10);
        if (end == word.c_str() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX) {
            throw std::runtime_error("token id file " + path + " holds '" + word +
                                     "', which is not a non-negative token id");
        }
        ids.push_back(static_cast<llama_token>(v));
    }
    if (ids.empty()) throw std::runtime_error("token id file " + path + " holds no token ids");
    return ids;
}

// llama.cpp is chatty at INFO level; keep warnings and errors, which explain
// a failed load.
void quiet_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

void run(const Options& o) {
    const std::vector<llama_token> tokens = read_token_ids(o.token_ids);
    const auto n_tokens = static_cast<uint32_t>(tokens.size());

    llama_log_set(quiet_log, nullptr);
    ggml_backend_load_all_from_path(DS4_ORACLE_LIBDIR);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = o.gpu ? 999 : 0;
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    // No repacked weight buffers: on CPUs with AMX the CPU library's AMX
    // buffer takes q8_0 weights whose ops it cannot all run, and graph
    // scheduling aborts (GGML_ASSERT(*cur_backend_id != -1), Sapphire Rapids,
    // 2026-12-06). The plain CPU buffers are the reference anyway.
    mp.use_extra_bufts = false;
    llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
    if (model == nullptr) throw std::runtime_error("llama.cpp could not load model " + o.model);

    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    for (uint32_t i = 0; i < n_tokens; ++i) {
        if (tokens[i] >= n_vocab) {
            llama_model_free(model);
            throw std::runtime_error("token id " + std::to_string(tokens[i]) + " at position " +
                                     std::to_string(i) + " is outside the vocabulary of " +
                                     std::to_string(n_vocab) + " tokens of " + o.model);
        }
    }

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_tokens;
    cp.n_batch = n_tokens;
    cp.n_seq_max = 1;
    cp.n_threads = o.threads;
    cp.n_threads_batch = o.threads;
    if (!o.gpu) {
        cp.n_ubatch = n_tokens;
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    } else {
        cp.n_ubatch = std::min<uint32_t>(n_tokens, cp.n_ubatch);
    }
    cp.no_perf = true;
    ds4::oracle_tools::SelectionMargins margins;
    if (!o.selection_margins.empty()) {
        cp.cb_eval = &ds4::oracle_tools::SelectionMargins::observe;
        cp.cb_eval_user_data = &margins;
    }
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) {
        llama_model_free(model);
        throw std::runtime_error("llama.cpp could not create a context of " + std::to_string(n_tokens) +
                                 " tokens for " + o.model);
    }

    llama_batch batch = llama_batch_init(static_cast<int32_t>(n_tokens), 0, 1);
    for (uint32_t i = 0; i < n_tokens; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = static_cast<llama_pos>(i);
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = static_cast<int32_t>(n_tokens);
    const int32_t rc = llama_decode(ctx, batch);

    std::string error;
    std::vector<float> logits;
    if (rc != 0) {
        error = "llama_decode failed with code " + std::to_string(rc) + " on " + o.model;
    } else {
        logits.reserve(size_t(n_tokens) * size_t(n_vocab));
        for (uint32_t i = 0; i < n_tokens && error.empty(); ++i) {
            const float* row = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
            if (row == nullptr) {
                error = "llama.cpp returned no logits for position " + std::to_string(i);
                break;
            }
            logits.insert(logits.end(), row, row + n_vocab);
        }
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    if (!error.empty()) throw std::runtime_error(error);

    // Every platform the oracle library ships for is little-endian, so the
    // in-memory floats are the file format.
    FILE* f = std::fopen(o.dump_logits.c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("cannot create " + o.dump_logits + ": " + std::strerror(errno));
    const size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    const bool closed = std::fclose(f) == 0;
    if (written != logits.size() || !closed) throw std::runtime_error("cannot write " + o.dump_logits);
    if (!o.selection_margins.empty()) margins.write(o.selection_margins, n_tokens);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    try {
        run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_logits: %s\n", e.what());
        return 1;
    }
    return 0;
}
