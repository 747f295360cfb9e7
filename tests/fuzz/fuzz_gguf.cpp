// Fuzz target for the GGUF reader: any bytes must parse or give ds4::Error,
// never crash; what parses must keep the reader's promises (tensors inside
// the file and aligned, look-ups finding every entry) and must survive a
// rewrite through GgufWriter unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../unit/gguf_random_content.h"
#include "fuzz_support.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace {

using namespace ds4;

template <typename Fn>
void tolerate_error(Fn&& fn) {
    try {
        fn();
    } catch (const Error&) {
    }
}

void exercise_lookups(const GgufFile& f) {
    for (const auto& kv : f.metadata()) {
        const std::string& key = kv.first;  // a named reference: lambdas cannot capture bindings before C++20 in clang 14
        FUZZ_REQUIRE(f.find(key) == &kv.second);
        tolerate_error([&] { (void)f.get_uint(key); });
        tolerate_error([&] { (void)f.get_int(key); });
        tolerate_error([&] { (void)f.get_float(key); });
        tolerate_error([&] { (void)f.get_bool(key); });
        tolerate_error([&] { (void)f.get_string(key); });
        tolerate_error([&] { (void)f.require_array(key).array_size(); });
    }
    FUZZ_REQUIRE(f.find("no such key \x01") == nullptr);
    tolerate_error([&] { (void)f.architecture(); });
    tolerate_error([&] { (void)f.require_uint("general.alignment"); });

    FUZZ_REQUIRE(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
    FUZZ_REQUIRE(f.data_offset() % f.alignment() == 0);
    uint64_t sum = 0;
    for (const auto& t : f.tensors()) {
        FUZZ_REQUIRE(f.find_tensor(t.name) == &t);
        FUZZ_REQUIRE(&f.require_tensor(t.name) == &t);
        FUZZ_REQUIRE(t.n_dims <= static_cast<uint32_t>(kGgufMaxDims));
        FUZZ_REQUIRE(t.file_offset == f.data_offset() + t.offset);
        FUZZ_REQUIRE(t.file_offset <= f.file_size() && t.nbytes <= f.file_size() - t.file_offset);
        FUZZ_REQUIRE(t.n_elements() >= 0 && t.n_rows() >= 0);
        const uint64_t rows = static_cast<uint64_t>(t.n_rows());
        FUZZ_REQUIRE(rows == 0 || t.row_bytes() * rows == t.nbytes);
        sum += t.nbytes;
    }
    FUZZ_REQUIRE(f.tensor_data_bytes() == sum);
    FUZZ_REQUIRE(f.find_tensor("no such tensor \x01") == nullptr);
}

// Rewrites what was read and reads it again: the same keys, values, tensor
// shapes and bytes must come back. The writer may refuse what the reader
// accepts (names over 63 bytes, tensors of no dimensions): that is an Error.
void rewrite_and_compare(const GgufFile& f, const uint8_t* data) {
    std::vector<uint8_t> bytes;
    try {
        GgufWriter w;
        for (const auto& [key, v] : f.metadata()) w.set(key, v);
        for (const auto& t : f.tensors())
            w.add_tensor_bytes(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                               std::vector<uint8_t>(data + t.file_offset, data + t.file_offset + t.nbytes));
        bytes = w.to_bytes();
    } catch (const Error&) {
        return;
    }
    std::unique_ptr<GgufFile> g;
    try {
        g = GgufFile::parse(bytes.data(), bytes.size(), "rewritten.gguf");
    } catch (const Error& e) {
        std::fprintf(stderr, "fuzz_gguf: the reader rejects what the writer wrote: %s\n", e.what());
        std::abort();
    }
    FUZZ_REQUIRE(g->metadata().size() == f.metadata().size());
    for (size_t k = 0; k < f.metadata().size(); ++k) {
        FUZZ_REQUIRE(g->metadata()[k].first == f.metadata()[k].first);
        FUZZ_REQUIRE(testing::value_difference(f.metadata()[k].second, g->metadata()[k].second).empty());
    }
    FUZZ_REQUIRE(g->alignment() == f.alignment());
    FUZZ_REQUIRE(g->tensors().size() == f.tensors().size());
    for (size_t i = 0; i < f.tensors().size(); ++i) {
        const auto& a = f.tensors()[i];
        const auto& b = g->tensors()[i];
        FUZZ_REQUIRE(a.name == b.name && a.type == b.type && a.n_dims == b.n_dims && a.nbytes == b.nbytes);
        for (int d = 0; d < kGgufMaxDims; ++d) FUZZ_REQUIRE(a.ne[d] == b.ne[d]);
        FUZZ_REQUIRE(std::memcmp(data + a.file_offset, bytes.data() + b.file_offset, a.nbytes) == 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<GgufFile> f;
    try {
        f = GgufFile::parse(data, size, "fuzz.gguf");
    } catch (const Error&) {
        return 0;
    }
    exercise_lookups(*f);
    // Rewriting copies the tensor data; keep it to inputs of fuzzing size.
    if (f->tensor_data_bytes() <= (1u << 20)) rewrite_and_compare(*f, data);
    return 0;
}
