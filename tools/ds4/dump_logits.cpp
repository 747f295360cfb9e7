#include "dump_logits.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "engine/session.h"

namespace ds4 {

namespace {
std::vector<int32_t> read_token_ids(const std::string& path, int64_t n_vocab) {
    std::ifstream in(path);
    if (!in) throw Error("cannot read token id file " + path + ".");
    std::vector<int32_t> ids;
    std::string word;
    while (in >> word) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != word.size())
            throw Error("token id file " + path + " holds '" + word + "', which is not an integer.");
        if (v < 0 || v >= n_vocab)
            throw Error("token id file " + path + " holds id " + word + ", outside the model's vocabulary of " +
                        std::to_string(n_vocab) + " tokens.");
        ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) throw Error("token id file " + path + " holds no token ids.");
    return ids;
}
}  // namespace

int run_dump_logits(Engine& engine, const Ds4Options& opts) {
    const int64_t V = engine.info().n_vocab;
    const std::vector<int32_t> ids = read_token_ids(opts.token_ids_file, V);
    SessionOptions so;
    so.n_ctx = std::max<int64_t>(opts.ctx, static_cast<int64_t>(ids.size()));
    so.prefill_chunk = opts.prefill_chunk;
    so.prefill_window = opts.dist_prefill_window;  // used only along a pipeline route
    const std::unique_ptr<Session> session = engine.new_session(so);
    const std::vector<float> logits = session->eval(ids, /*all_logits=*/true);

    FILE* f = std::fopen(opts.dump_logits_file.c_str(), "wb");
    if (!f) throw Error("cannot write logits to " + opts.dump_logits_file + ".");
    const size_t wrote = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    const bool ok = wrote == logits.size() && std::fclose(f) == 0;
    if (!ok) throw Error("writing logits to " + opts.dump_logits_file + " failed (disk full?).");
    std::fprintf(stderr, "ds4: wrote logits of %zu positions x %lld tokens to %s\n", ids.size(),
                 static_cast<long long>(V), opts.dump_logits_file.c_str());
    return 0;
}

}  // namespace ds4
