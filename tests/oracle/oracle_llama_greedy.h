// llama.cpp's greedy continuation, computed in the test process with
// llama.cpp's library (oracle tests link it): one model load and one decode
// per step instead of one llama_logits launch per step.
#pragma once

#include "oracle_harness.h"

#include <ggml-backend.h>
#include <llama.h>

namespace ds4::oracle {

inline void llama_quiet_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// llama.cpp's CPU backends, loaded once per test process (warnings and
// errors still printed).
inline void llama_oracle_init() {
    static const bool backends = [] {
        llama_log_set(llama_quiet_log, nullptr);
        ggml_backend_load_all_from_path(DS4_ORACLE_LIBDIR);
        llama_backend_init();
        return true;
    }();
    (void)backends;
}

// Same settings as tests/oracle_tools/llama_logits.cpp (CPU, F32 KV cache, no
// flash attention), but the prompt is decoded once and each new token
// incrementally through the KV cache.
inline Continuation llama_greedy(const fs::path& model_path, const std::vector<int32_t>& prompt, int steps,
                                 int threads = 2) {
    llama_oracle_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    mp.use_extra_bufts = false;  // as in llama_logits.cpp: no AMX repacking, whatever the CPU
    llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
    if (model == nullptr) throw std::runtime_error("llama.cpp could not load model " + model_path.string());
    const auto n_vocab = size_t(llama_vocab_n_tokens(llama_model_get_vocab(model)));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = uint32_t(prompt.size() + size_t(steps));
    cp.n_batch = cp.n_ubatch = uint32_t(prompt.size());
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) {
        llama_model_free(model);
        throw std::runtime_error("llama.cpp could not create a context for " + model_path.string());
    }

    Continuation c;
    std::string error;
    llama_batch batch = llama_batch_init(int32_t(prompt.size()), 0, 1);
    auto decode = [&](const std::vector<int32_t>& toks, size_t pos0) {
        batch.n_tokens = int32_t(toks.size());
        for (size_t i = 0; i < toks.size(); ++i) {
            batch.token[i] = toks[i];
            batch.pos[i] = llama_pos(pos0 + i);
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = i + 1 == toks.size();
        }
        return llama_decode(ctx, batch) == 0;
    };
    size_t pos = 0;
    std::vector<int32_t> next = prompt;
    for (int s = 0; s < steps; ++s) {
        if (!decode(next, pos)) {
            error = "llama_decode failed at greedy step " + std::to_string(s);
            break;
        }
        pos += next.size();
        const float* row = llama_get_logits_ith(ctx, -1);
        Logits l{1, n_vocab, std::vector<float>(row, row + n_vocab)};
        const auto tok = int32_t(l.argmax(0));
        c.tokens.push_back(tok);
        c.last_rows.push_back(std::move(l));
        next = {tok};
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    if (!error.empty()) throw std::runtime_error(error);
    return c;
}

}  // namespace ds4::oracle
