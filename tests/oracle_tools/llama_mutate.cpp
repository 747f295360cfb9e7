// llama_mutate IN OUT MUTATION...: a copy of a GGUF file with planted bugs,
// written with ggml's gguf API. The mutation tests run ds4 on the copy and
// llama.cpp on the original, and require the comparison to FAIL: proof that
// the bound and the stimuli of the oracle tests can see such a bug.
//
//   --scale-f32 KEY F         a float metadata value times F (e.g. a RoPE base off by 1%)
//   --add-u32 KEY D           an unsigned metadata value plus D (e.g. a window off by one)
//   --swap-experts L A B      experts A and B of layer L's ffn_{gate,up,down}_exps
//                             weights trade places (the router is left alone:
//                             the bug of reading the wrong expert)
//   --copy-block TENSOR D S   block S of a tensor's data written over block D
//                             (a wrong block decoded, in any quant type)
#include "../oracle/oracle_gguf_rewrite.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

struct Mutation {
    std::string op;
    std::vector<std::string> args;
};

long long integer(const std::string& s) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') throw std::runtime_error("'" + s + "' is not an integer");
    return v;
}

double real(const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') throw std::runtime_error("'" + s + "' is not a number");
    return v;
}

void edit_metadata(gguf_context* g, const Mutation& m) {
    const int64_t k = gguf_find_key(g, m.args[0].c_str());
    if (k < 0) throw std::runtime_error("the file has no metadata key " + m.args[0]);
    if (m.op == "--scale-f32") {
        if (gguf_get_kv_type(g, k) != GGUF_TYPE_FLOAT32) throw std::runtime_error(m.args[0] + " is not a float32");
        gguf_set_val_f32(g, m.args[0].c_str(), float(gguf_get_val_f32(g, k) * real(m.args[1])));
    } else {
        if (gguf_get_kv_type(g, k) != GGUF_TYPE_UINT32) throw std::runtime_error(m.args[0] + " is not a uint32");
        gguf_set_val_u32(g, m.args[0].c_str(), uint32_t(int64_t(gguf_get_val_u32(g, k)) + integer(m.args[1])));
    }
}

// Swaps matrices a and b along the outermost dimension of an expert tensor.
void swap_experts(ggml_tensor& t, int64_t a, int64_t b) {
    const int64_t n_exp = t.ne[ggml_n_dims(&t) - 1];
    if (a < 0 || b < 0 || a >= n_exp || b >= n_exp || a == b)
        throw std::runtime_error(std::string(t.name) + " has " + std::to_string(n_exp) + " experts; cannot swap " +
                                 std::to_string(a) + " and " + std::to_string(b));
    const size_t per = ggml_nbytes(&t) / size_t(n_exp);
    auto* d = static_cast<uint8_t*>(t.data);
    std::vector<uint8_t> tmp(d + a * per, d + (a + 1) * per);
    std::memcpy(d + a * per, d + b * per, per);
    std::memcpy(d + b * per, tmp.data(), per);
}

void copy_block(ggml_tensor& t, int64_t dst, int64_t src) {
    const size_t bytes = ggml_type_size(t.type);
    const int64_t n_blocks = ggml_nelements(&t) / ggml_blck_size(t.type);
    if (dst < 0 || src < 0 || dst >= n_blocks || src >= n_blocks || dst == src)
        throw std::runtime_error(std::string(t.name) + " has " + std::to_string(n_blocks) + " blocks; cannot copy " +
                                 std::to_string(src) + " over " + std::to_string(dst));
    auto* d = static_cast<uint8_t*>(t.data);
    std::memcpy(d + dst * bytes, d + src * bytes, bytes);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc < 4) throw std::runtime_error("usage: llama_mutate IN OUT MUTATION... (see the source)");
        std::vector<Mutation> ms;
        for (int i = 3; i < argc;) {
            const std::string op = argv[i++];
            const int n = op == "--scale-f32" || op == "--add-u32" ? 2 : op == "--swap-experts" || op == "--copy-block" ? 3 : -1;
            if (n < 0) throw std::runtime_error("unknown mutation " + op);
            if (i + n > argc) throw std::runtime_error(op + " needs " + std::to_string(n) + " values");
            ms.push_back({op, std::vector<std::string>(argv + i, argv + i + n)});
            i += n;
        }
        int64_t applied = 0;
        ds4::oracle::gguf_rewrite(
            argv[1], argv[2],
            [&](ggml_tensor& t) {
                const std::string name = t.name;
                for (const auto& m : ms) {
                    if (m.op == "--copy-block" && name == m.args[0]) {
                        copy_block(t, integer(m.args[1]), integer(m.args[2]));
                        ++applied;
                    }
                    if (m.op == "--swap-experts") {
                        const std::string p = "blk." + m.args[0] + ".";
                        for (const char* w : {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"})
                            if (name == p + w) {
                                swap_experts(t, integer(m.args[1]), integer(m.args[2]));
                                ++applied;
                            }
                    }
                }
                return ds4::oracle::TensorAction::keep;
            },
            [&](gguf_context* g) {
                for (const auto& m : ms)
                    if (m.op == "--scale-f32" || m.op == "--add-u32") {
                        edit_metadata(g, m);
                        ++applied;
                    }
            });
        if (applied == 0) throw std::runtime_error("no mutation applied: no such tensor or key in " + std::string(argv[1]));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_mutate: %s\n", e.what());
        return 1;
    }
    return 0;
}
