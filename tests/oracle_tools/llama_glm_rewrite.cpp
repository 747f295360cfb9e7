// llama_glm_rewrite IN OUT [--experts E --experts-used K] [--expert-groups G --groups-used U]
//                  [--indexer-top-k T] [--indexer-types 1,0,...] [--weights-norm 0|1]
//                  [--weights-scale S] [--indexer-heads H] [--seed N]
//
// test-llama-archs writes its glm-dsa model with 2 experts (both used), no
// expert groups, unnormalised and unscaled routing weights, a full indexer
// in every block and an indexer top-k larger than any prompt, so routing
// and the indexer's selection cannot go wrong visibly there. This tool
// rewrites that F32 file (with ggml's gguf API) into one that exercises them:
//   - E experts, K used: every `*_exps.*` tensor and exp_probs_b keep their
//     experts and get new ones drawn N(0, 0.1) like the generator; the router
//     `ffn_gate_inp` is redrawn N(0, 1);
//   - G expert groups of which U are used (expert_group_count / _used_count);
//   - `attention.indexer.top_k` = T and `attention.indexer.types` as given
//     (one entry per block; 0 = reuse the previous full block's top-k);
//   - `expert_weights_norm` and `expert_weights_scale`;
//   - H indexer heads instead of the generator's 64 (the first H of
//     `indexer.attn_q_b` and `indexer.proj`): the indexer's query projection
//     is most of the file, and a test decoding token by token reads it
//     once per token.
// llama.cpp then loads the result like any other file and is the judge.
#include <ggml.h>
#include <gguf.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include "../oracle/oracle_ggml_ptr.h"

namespace {

struct Options {
    std::string in, out;
    int64_t experts = 0, used = 0, groups = 0, groups_used = 0, top_k = 0, norm = -1, indexer_heads = 0;
    double scale = -1;
    std::vector<uint32_t> types;
    uint64_t seed = 0;
};

[[noreturn]] void usage(const std::string& sentence) {
    std::fprintf(stderr, "llama_glm_rewrite: %s\n", sentence.c_str());
    std::fprintf(stderr, "usage: llama_glm_rewrite IN OUT [--experts E --experts-used K] [--expert-groups G "
                         "--groups-used U] [--indexer-top-k T] [--indexer-types 1,0,...] [--weights-norm 0|1] "
                         "[--weights-scale S] [--indexer-heads H] [--seed N]\n");
    std::exit(1);
}

Options parse(int argc, char** argv) {
    Options o;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto text = [&]() -> std::string {
            if (i + 1 >= argc) usage("option " + a + " needs a value.");
            return argv[++i];
        };
        auto num = [&]() -> int64_t {
            const std::string v = text();
            char* end = nullptr;
            const long long x = std::strtoll(v.c_str(), &end, 10);
            if (*end != '\0' || x < 0) usage("option " + a + " needs a non-negative integer.");
            return x;
        };
        if (a == "--experts") o.experts = num();
        else if (a == "--experts-used") o.used = num();
        else if (a == "--expert-groups") o.groups = num();
        else if (a == "--groups-used") o.groups_used = num();
        else if (a == "--indexer-top-k") o.top_k = num();
        else if (a == "--weights-norm") o.norm = num();
        else if (a == "--indexer-heads") o.indexer_heads = num();
        else if (a == "--seed") o.seed = uint64_t(num());
        else if (a == "--weights-scale") {
            const std::string v = text();
            char* end = nullptr;
            o.scale = std::strtod(v.c_str(), &end);
            if (*end != '\0' || o.scale < 0) usage("option " + a + " needs a non-negative number.");
        } else if (a == "--indexer-types") {
            std::stringstream s(text());
            for (std::string item; std::getline(s, item, ',');) o.types.push_back(uint32_t(std::stoul(item)));
        } else if (!a.empty() && a[0] == '-') usage("unknown option " + a + ".");
        else pos.push_back(a);
    }
    if (pos.size() != 2) usage("expected IN and OUT.");
    if ((o.experts == 0) != (o.used == 0)) usage("--experts and --experts-used go together.");
    if (o.used > o.experts) usage("--experts-used must not exceed --experts.");
    if ((o.groups == 0) != (o.groups_used == 0)) usage("--expert-groups and --groups-used go together.");
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

void run(const Options& o) {
    ggml_context* src_data = nullptr;
    gguf_context* src = gguf_init_from_file(o.in.c_str(), {false, &src_data});
    if (src == nullptr) throw std::runtime_error("cannot read GGUF file " + o.in);
    const ds4::oracle::GgufPtr src_owner(src);
    const ds4::oracle::GgmlPtr src_data_owner(src_data);
    const std::string arch = "glm-dsa";
    const int64_t ak = gguf_find_key(src, "general.architecture");
    if (ak < 0 || std::string(gguf_get_val_str(src, ak)) != arch) throw std::runtime_error(o.in + " is not a glm-dsa file");
    const int64_t old_experts = get_u32(src, arch + ".expert_count");
    const int64_t experts = o.experts ? o.experts : old_experts;
    const int64_t n_layer = get_u32(src, arch + ".block_count");
    if (experts < old_experts) throw std::runtime_error("--experts cannot remove experts");
    if (!o.types.empty() && int64_t(o.types.size()) != n_layer)
        throw std::runtime_error("--indexer-types needs one entry per block (" + std::to_string(n_layer) + ")");
    if (o.groups && experts % o.groups != 0) throw std::runtime_error("--expert-groups must divide the experts");

    std::mt19937_64 rng(o.seed);
    std::normal_distribution<float> weight(0.0f, 0.1f), router(0.0f, 1.0f);
    const int64_t n_tensors = gguf_get_n_tensors(src);
    size_t need = ggml_tensor_overhead() * size_t(n_tensors + 1) + 1024;
    for (int64_t i = 0; i < n_tensors; ++i) {
        const ggml_tensor* t = ggml_get_tensor(src_data, gguf_get_tensor_name(src, i));
        need += ggml_nbytes(t) * size_t(experts) / size_t(old_experts) + ggml_nbytes(t) + 2 * GGML_MEM_ALIGN;
    }
    ggml_context* dst_data = ggml_init({need, nullptr, false});
    gguf_context* dst = gguf_init_empty();
    const ds4::oracle::GgufPtr dst_owner(dst);
    const ds4::oracle::GgmlPtr dst_data_owner(dst_data);
    gguf_set_kv(dst, src);
    gguf_set_val_u32(dst, (arch + ".expert_count").c_str(), uint32_t(experts));
    if (o.used) gguf_set_val_u32(dst, (arch + ".expert_used_count").c_str(), uint32_t(o.used));
    if (o.groups) {
        gguf_set_val_u32(dst, (arch + ".expert_group_count").c_str(), uint32_t(o.groups));
        gguf_set_val_u32(dst, (arch + ".expert_group_used_count").c_str(), uint32_t(o.groups_used));
    }
    if (o.top_k) gguf_set_val_u32(dst, (arch + ".attention.indexer.top_k").c_str(), uint32_t(o.top_k));
    if (!o.types.empty())
        gguf_set_arr_data(dst, (arch + ".attention.indexer.types").c_str(), GGUF_TYPE_UINT32, o.types.data(),
                          o.types.size());
    if (o.norm >= 0) gguf_set_val_bool(dst, (arch + ".expert_weights_norm").c_str(), o.norm != 0);
    if (o.scale >= 0) gguf_set_val_f32(dst, (arch + ".expert_weights_scale").c_str(), float(o.scale));
    const int64_t old_heads = get_u32(src, arch + ".attention.indexer.head_count");
    if (o.indexer_heads > old_heads) throw std::runtime_error("--indexer-heads cannot add heads");
    if (o.indexer_heads) gguf_set_val_u32(dst, (arch + ".attention.indexer.head_count").c_str(), uint32_t(o.indexer_heads));

    for (int64_t i = 0; i < n_tensors; ++i) {
        const std::string name = gguf_get_tensor_name(src, i);
        ggml_tensor* t = ggml_get_tensor(src_data, name.c_str());
        const bool per_expert = name.find("_exps.") != std::string::npos || ends_with(name, ".exp_probs_b.bias");
        const bool router_w = ends_with(name, ".ffn_gate_inp.weight");
        if (o.indexer_heads &&
            (ends_with(name, ".indexer.attn_q_b.weight") || ends_with(name, ".indexer.proj.weight"))) {
            // Rows are heads (proj) or heads x head dim (attn_q_b): keep the first ones.
            if (t->type != GGML_TYPE_F32 || t->ne[1] % old_heads != 0)
                throw std::runtime_error("tensor " + name + " is not an F32 matrix of " + std::to_string(old_heads) +
                                         " heads");
            ggml_tensor* w = ggml_new_tensor_2d(dst_data, GGML_TYPE_F32, t->ne[0], t->ne[1] / old_heads * o.indexer_heads);
            ggml_set_name(w, name.c_str());
            std::memcpy(w->data, t->data, ggml_nbytes(w));
            gguf_add_tensor(dst, w);
            continue;
        }
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
        const int64_t n_new = ggml_nelements(w), keep = ggml_nelements(t);
        if (router_w) {
            for (int64_t j = 0; j < n_new; ++j) dst_f[j] = router(rng);
        } else {
            std::memcpy(dst_f, t->data, size_t(keep) * sizeof(float));
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
        std::fprintf(stderr, "llama_glm_rewrite: %s\n", e.what());
        return 1;
    }
    return 0;
}
