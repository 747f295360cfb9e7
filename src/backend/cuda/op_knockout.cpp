#include "backend/cuda/op_knockout.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace ds4::cuda {

namespace {
struct Knockouts {
    std::string raw;
    std::vector<std::string> patterns;
};
const Knockouts& knockouts() {
    static const Knockouts k = [] {
        Knockouts out;
        if (const char* v = std::getenv("DS4_CUDA_KNOCKOUT")) out.raw = v;
        size_t at = 0;
        while (at <= out.raw.size()) {
            const size_t comma = out.raw.find(',', at);
            const size_t end = comma == std::string::npos ? out.raw.size() : comma;
            if (end > at) out.patterns.push_back(out.raw.substr(at, end - at));
            if (comma == std::string::npos) break;
            at = comma + 1;
        }
        return out;
    }();
    return k;
}
}  // namespace

bool knocked_out(std::string_view what) {
    for (const std::string& p : knockouts().patterns) {
        if (p[0] == '=' ? what == std::string_view(p).substr(1) : what.find(p) != std::string_view::npos) return true;
    }
    return false;
}

const char* knockout_patterns() { return knockouts().raw.c_str(); }

}  // namespace ds4::cuda
