// llama_dsv4_rewrite IN OUT [--experts E --experts-used K] [--hash-layers H]
//                   [--indexer-top-k T] [--seed N]
//
// test-llama-archs writes its deepseek4 model with 2 experts (both used),
// no hash-routed layers and an indexer top-k larger than any prompt, so
// scored routing, hash routing and the indexer's block selection cannot go
// wrong visibly there. This tool rewrites that F32 file (with ggml's gguf
// API) into one that exercises them:
//   - E experts, K used: every `*_exps.*` tensor and exp_probs_b(_vl) keeps
//     its experts and gets new ones drawn N(0, 0.1) like the generator; the
//     router `ffn_gate_inp` is redrawn N(0, 1) so routing decisions are not
//     near-ties;
//   - the first H layers hash-routed: `hash_layer_count` = H, a random
//     `ffn_gate_tid2eid.weight` (i32 [K, n_vocab], K distinct experts per
//     token) added and `exp_probs_b.bias` removed on those layers (llama.cpp
//     loads exactly that set of tensors);
//   - `attention.indexer.top_k` = T.
// llama.cpp then loads the result like any other file and is the judge.
#include <ggml.h>
#include <gguf.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>
#include "../oracle/oracle_ggml_ptr.h"

namespace {

struct Options {
    std::string in, out;
    int64_t experts = 0, used = 0, hash_layers = -1, top_k = 0;
    uint64_t seed = 0;
};

[[noreturn]] void usage(const std::string& sentence) {
    std::fprintf(stderr, "llama_dsv4_rewrite: %s\n", sentence.c_str());
    std::fprintf(stderr, "usage: llama_dsv4_rewrite IN OUT [--experts E --experts-used K] [--hash-layers H] "
                         "[--indexer-top-k T] [--seed N]\n");
    std::exit(1);
}

Options parse(int argc, char** argv) {
    Options o;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto num = [&]() -> int64_t {
            if (i + 1 >= argc) usage("option " + a + " needs a value.");
            char* end = nullptr;
            const long long v = std::strtoll(argv[++i], &end, 10);
            if (*end != '\0' || v < 0) usage("option " + a + " needs a non-negative integer.");
            return v;
        };
        if (a == "--experts") o.experts = num();
        else if (a == "--experts-used") o.used = num();
        else if (a == "--hash-layers") o.hash_layers = num();
        else if (a == "--indexer-top-k") o.top_k = num();
        else if (a == "--seed") o.seed = uint64_t(num());
        else if (!a.empty() && a[0] == '-') usage("unknown option " + a + ".");
        else pos.push_back(a);
    }
    if (pos.size() != 2) usage("expected IN and OUT.");
    if ((o.experts == 0) != (o.used == 0)) usage("--experts and --experts-used go together.");
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
    if (k < 0 || gguf_get_kv_type(g, k) != GGUF_TYPE_UINT32) throw std::runtime_error("the file has no u32 key " + key);
    return gguf_get_val_u32(g, k);
}

int layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    return std::atoi(name.c_str() + 4);
}

void run(const Options& o) {
    ggml_context* src_data = nullptr;
    gguf_context* src = gguf_init_from_file(o.in.c_str(), {false, &src_data});
    if (src == nullptr) throw std::runtime_error("cannot read GGUF file " + o.in);
    const ds4::oracle::GgufPtr src_owner(src);
    const ds4::oracle::GgmlPtr src_data_owner(src_data);
    const int64_t ak = gguf_find_key(src, "general.architecture");
    if (ak < 0 || std::string(gguf_get_val_str(src, ak)) != "deepseek4")
        throw std::runtime_error(o.in + " is not a deepseek4 file");
    const std::string arch = "deepseek4";
    const int64_t old_experts = get_u32(src, arch + ".expert_count");
    const int64_t experts = o.experts ? o.experts : old_experts;
    const int64_t used = o.used ? o.used : get_u32(src, arch + ".expert_used_count");
    const int64_t n_layer = get_u32(src, arch + ".block_count");
    const int64_t hash_layers = o.hash_layers >= 0 ? o.hash_layers : get_u32(src, arch + ".hash_layer_count");
    if (experts < old_experts) throw std::runtime_error("--experts cannot remove experts");
    if (hash_layers > n_layer) throw std::runtime_error("--hash-layers exceeds the layer count");
    const int64_t tk = gguf_find_key(src, "tokenizer.ggml.tokens");
    if (tk < 0) throw std::runtime_error(o.in + " has no tokenizer.ggml.tokens");
    const int64_t n_vocab = int64_t(gguf_get_arr_n(src, tk));

    std::mt19937_64 rng(o.seed);
    std::normal_distribution<float> weight(0.0f, 0.1f), router(0.0f, 1.0f);

    const int64_t n_tensors = gguf_get_n_tensors(src);
    size_t need = ggml_tensor_overhead() * size_t(n_tensors + n_layer + 1) + 1024;
    for (int64_t i = 0; i < n_tensors; ++i) {
        const ggml_tensor* t = ggml_get_tensor(src_data, gguf_get_tensor_name(src, i));
        need += ggml_nbytes(t) * size_t(experts) / size_t(old_experts) + ggml_nbytes(t) + 2 * GGML_MEM_ALIGN;
    }
    need += size_t(hash_layers) * (size_t(used * n_vocab) * sizeof(int32_t) + 2 * GGML_MEM_ALIGN);
    ggml_context* dst_data = ggml_init({need, nullptr, false});
    gguf_context* dst = gguf_init_empty();
    const ds4::oracle::GgufPtr dst_owner(dst);
    const ds4::oracle::GgmlPtr dst_data_owner(dst_data);
    gguf_set_kv(dst, src);
    gguf_set_val_u32(dst, (arch + ".expert_count").c_str(), uint32_t(experts));
    gguf_set_val_u32(dst, (arch + ".expert_used_count").c_str(), uint32_t(used));
    gguf_set_val_u32(dst, (arch + ".hash_layer_count").c_str(), uint32_t(hash_layers));
    if (o.top_k) gguf_set_val_u32(dst, (arch + ".attention.indexer.top_k").c_str(), uint32_t(o.top_k));

    for (int64_t i = 0; i < n_tensors; ++i) {
        const std::string name = gguf_get_tensor_name(src, i);
        ggml_tensor* t = ggml_get_tensor(src_data, name.c_str());
        const int il = layer_of(name);
        if (ends_with(name, ".ffn_gate_tid2eid.weight")) continue;  // redrawn below
        if (ends_with(name, ".exp_probs_b.bias") && il >= 0 && il < hash_layers) continue;
        const bool per_expert = name.find("_exps.") != std::string::npos || ends_with(name, ".exp_probs_b.bias") ||
                                ends_with(name, ".exp_probs_b_vl.bias");
        const bool router_w = ends_with(name, ".ffn_gate_inp.weight");
        if ((!per_expert && !router_w) || experts == old_experts) {
            gguf_add_tensor(dst, t);
            continue;
        }
        if (t->type != GGML_TYPE_F32)
            throw std::runtime_error("tensor " + name + " is " + ggml_type_name(t->type) + "; rewrite the F32 file");
        const int nd = ggml_n_dims(t);
        int64_t ne[GGML_MAX_DIMS] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        const int edim = nd - 1;  // experts are the outermost dimension
        if (ne[edim] != old_experts)
            throw std::runtime_error("tensor " + name + " does not have " + std::to_string(old_experts) +
                                     " experts in its last dimension");
        ne[edim] = experts;
        ggml_tensor* w = ggml_new_tensor(dst_data, GGML_TYPE_F32, nd, ne);
        ggml_set_name(w, name.c_str());
        auto* dst_f = static_cast<float*>(w->data);
        const auto* src_f = static_cast<const float*>(t->data);
        const int64_t n_new = ggml_nelements(w);
        if (router_w) {
            for (int64_t j = 0; j < n_new; ++j) dst_f[j] = router(rng);
        } else {
            const int64_t keep = ggml_nelements(t);
            std::memcpy(dst_f, src_f, size_t(keep) * sizeof(float));
            for (int64_t j = keep; j < n_new; ++j) dst_f[j] = weight(rng);
        }
        gguf_add_tensor(dst, w);
    }
    std::vector<int32_t> perm(static_cast<size_t>(experts));
    for (int64_t il = 0; il < hash_layers; ++il) {
        ggml_tensor* w = ggml_new_tensor_2d(dst_data, GGML_TYPE_I32, used, n_vocab);
        ggml_set_name(w, ("blk." + std::to_string(il) + ".ffn_gate_tid2eid.weight").c_str());
        auto* ids = static_cast<int32_t*>(w->data);
        for (int64_t tok = 0; tok < n_vocab; ++tok) {
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            std::copy(perm.begin(), perm.begin() + used, ids + tok * used);
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
        std::fprintf(stderr, "llama_dsv4_rewrite: %s\n", e.what());
        return 1;
    }
    return 0;
}
