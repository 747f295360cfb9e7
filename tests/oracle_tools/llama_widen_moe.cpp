// llama_widen_moe IN OUT --experts E --experts-used K [--kv-heads H]
//                 [--router-stdev S] [--seed N]
//
// test-llama-archs writes MoE models with 2 experts, both used, and as many
// KV heads as query heads. On such a file top-k routing, the renormalisation
// of the routing weights and grouped-query attention cannot go wrong visibly:
// every expert is always chosen and the weights sum to one anyway. This tool
// rewrites an F32 file (with ggml's gguf API) into one that exercises them:
//   - E experts: each `*_exps.*` tensor and `*_exps.scale`/`.input_scale`
//     keeps its experts and gets new ones drawn N(0, 0.1) like the generator;
//   - K experts used per token;
//   - a redrawn router (`ffn_gate_inp.weight`) with N(0, S) weights, S = 1 by
//     default, so router logits are spread wide enough that a 1e-6 rounding
//     difference between two engines practically never flips the top-k;
//   - H KV heads (must divide the query heads): attn_k / attn_v weights and
//     biases keep their first H heads.
// llama.cpp then loads the result like any other file and is the judge.
#include <ggml.h>
#include <gguf.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>
#include "../oracle/oracle_ggml_ptr.h"

namespace {

struct Options {
    std::string in, out;
    int64_t experts = 0, used = 0, kv_heads = 0;
    float router_stdev = 1.0f;
    uint64_t seed = 0;
};

[[noreturn]] void usage(const std::string& sentence) {
    std::fprintf(stderr, "llama_widen_moe: %s\n", sentence.c_str());
    std::fprintf(stderr, "usage: llama_widen_moe IN OUT --experts E --experts-used K [--kv-heads H] "
                         "[--router-stdev S] [--seed N]\n");
    std::exit(1);
}

Options parse(int argc, char** argv) {
    Options o;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto num = [&]() -> double {
            if (i + 1 >= argc) usage("option " + a + " needs a value.");
            char* end = nullptr;
            const double v = std::strtod(argv[++i], &end);
            if (*end != '\0' || !(v > 0)) usage("option " + a + " needs a positive number.");
            return v;
        };
        if (a == "--experts") o.experts = int64_t(num());
        else if (a == "--experts-used") o.used = int64_t(num());
        else if (a == "--kv-heads") o.kv_heads = int64_t(num());
        else if (a == "--router-stdev") o.router_stdev = float(num());
        else if (a == "--seed") o.seed = uint64_t(num());
        else if (!a.empty() && a[0] == '-') usage("unknown option " + a + ".");
        else pos.push_back(a);
    }
    if (pos.size() != 2) usage("expected IN and OUT.");
    if (o.experts == 0 || o.used == 0) usage("--experts and --experts-used are required.");
    if (o.used > o.experts) usage("--experts-used must not exceed --experts.");
    o.in = pos[0];
    o.out = pos[1];
    return o;
}

bool ends_with(const std::string& s, const char* suf) {
    const size_t n = std::strlen(suf);
    return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

uint32_t get_u32(gguf_context* g, const std::string& key) {
    const int64_t k = gguf_find_key(g, key.c_str());
    if (k < 0 || gguf_get_kv_type(g, k) != GGUF_TYPE_UINT32) {
        throw std::runtime_error("the file has no u32 key " + key);
    }
    return gguf_get_val_u32(g, k);
}

void run(const Options& o) {
    ggml_context* src_data = nullptr;
    gguf_context* src = gguf_init_from_file(o.in.c_str(), {false, &src_data});
    if (src == nullptr) throw std::runtime_error("cannot read GGUF file " + o.in);
    const ds4::oracle::GgufPtr src_owner(src);
    const ds4::oracle::GgmlPtr src_data_owner(src_data);
    const int64_t ak = gguf_find_key(src, "general.architecture");
    if (ak < 0) throw std::runtime_error(o.in + " has no general.architecture");
    const std::string arch = gguf_get_val_str(src, ak);
    const int64_t old_experts = get_u32(src, arch + ".expert_count");
    const int64_t n_head = get_u32(src, arch + ".attention.head_count");
    const int64_t old_kv = get_u32(src, arch + ".attention.head_count_kv");
    const int64_t kv = o.kv_heads ? o.kv_heads : old_kv;
    if (o.experts < old_experts) throw std::runtime_error("--experts cannot remove experts");
    if (kv > old_kv || n_head % kv != 0) {
        throw std::runtime_error("--kv-heads must divide the " + std::to_string(n_head) +
                                 " query heads and not exceed the " + std::to_string(old_kv) + " KV heads");
    }

    std::mt19937_64 rng(o.seed);
    std::normal_distribution<float> weight(0.0f, 0.1f), router(0.0f, o.router_stdev);

    const int64_t n_tensors = gguf_get_n_tensors(src);
    size_t need = ggml_tensor_overhead() * size_t(n_tensors + 1) + 1024;
    for (int64_t i = 0; i < n_tensors; ++i) {
        const ggml_tensor* t = ggml_get_tensor(src_data, gguf_get_tensor_name(src, i));
        need += ggml_nbytes(t) * size_t(o.experts) / size_t(old_experts) + ggml_nbytes(t) + 2 * GGML_MEM_ALIGN;
    }
    ggml_context* dst_data = ggml_init({need, nullptr, false});
    gguf_context* dst = gguf_init_empty();
    const ds4::oracle::GgufPtr dst_owner(dst);
    const ds4::oracle::GgmlPtr dst_data_owner(dst_data);
    gguf_set_kv(dst, src);
    gguf_set_val_u32(dst, (arch + ".expert_count").c_str(), uint32_t(o.experts));
    gguf_set_val_u32(dst, (arch + ".expert_used_count").c_str(), uint32_t(o.used));
    gguf_set_val_u32(dst, (arch + ".attention.head_count_kv").c_str(), uint32_t(kv));

    for (int64_t i = 0; i < n_tensors; ++i) {
        const std::string name = gguf_get_tensor_name(src, i);
        ggml_tensor* t = ggml_get_tensor(src_data, name.c_str());
        const bool per_expert = name.find("_exps.") != std::string::npos || ends_with(name, ".exp_probs_b.bias") ||
                                ends_with(name, ".exp_probs_b");
        const bool router_w = ends_with(name, ".ffn_gate_inp.weight");
        const bool kv_proj = name.find(".attn_k.") != std::string::npos || name.find(".attn_v.") != std::string::npos;
        const bool kv_scale = ends_with(name, ".scale") || ends_with(name, ".input_scale");
        if (!per_expert && !router_w && !(kv_proj && !kv_scale && kv != old_kv)) {
            gguf_add_tensor(dst, t);
            continue;
        }
        if (t->type != GGML_TYPE_F32) {
            throw std::runtime_error("tensor " + name + " is " + ggml_type_name(t->type) +
                                     "; widen the F32 file before quantizing it");
        }
        const int nd = ggml_n_dims(t);
        int64_t ne[GGML_MAX_DIMS] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        // The expert index is the last (outermost) dimension of every
        // per-expert tensor and of the router's output.
        const int edim = nd - 1;
        if ((per_expert || router_w) && ne[edim] != old_experts) {
            throw std::runtime_error("tensor " + name + " does not have " + std::to_string(old_experts) +
                                     " experts in its last dimension");
        }
        if (per_expert || router_w) ne[edim] = o.experts;
        if (kv_proj) {
            const int kdim = nd - 1;  // output features: heads x head_dim
            if (ne[kdim] % old_kv != 0) throw std::runtime_error("tensor " + name + " is not whole KV heads");
            ne[kdim] = ne[kdim] / old_kv * kv;
        }
        ggml_tensor* w = ggml_new_tensor(dst_data, GGML_TYPE_F32, nd, ne);
        ggml_set_name(w, name.c_str());
        auto* dst_f = static_cast<float*>(w->data);
        const auto* src_f = static_cast<const float*>(t->data);
        const int64_t n_new = ggml_nelements(w);
        if (router_w) {
            for (int64_t j = 0; j < n_new; ++j) dst_f[j] = router(rng);
        } else {
            // Outermost dimension shrinks or grows: the kept prefix is
            // contiguous, the rest is new.
            const int64_t keep = std::min(ggml_nelements(t), n_new);
            std::memcpy(dst_f, src_f, size_t(keep) * sizeof(float));
            for (int64_t j = keep; j < n_new; ++j) dst_f[j] = weight(rng);
        }
        gguf_add_tensor(dst, w);
    }
    if (!gguf_write_to_file(dst, o.out.c_str(), false)) throw std::runtime_error("cannot write GGUF file " + o.out);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    try {
        run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_widen_moe: %s\n", e.what());
        return 1;
    }
    return 0;
}
