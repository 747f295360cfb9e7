// Driver for every fuzz target when libFuzzer is not used (gcc builds, ctest):
//   fuzz_x [--seconds S] [--iterations N] [--seed X] CORPUS_DIR_OR_FILE...
// Runs each corpus file through LLVMFuzzerTestOneInput, then random mutations
// of them (bit flips, byte sets, truncations, insertions, splices, extreme
// u32/u64 fields) for N iterations or S seconds, whichever comes first
// (default 20000 / 20 s). Prints the seed so a run can be repeated. Exits 0
// unless the target crashes; the crash itself is the failure, and the input
// that caused it is saved as ./crash-<seed>-<iteration>.bin first.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include "support/test_seed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input being run, for the crash handler to save.
const uint8_t* g_current = nullptr;
size_t g_current_size = 0;
char g_crash_name[128] = "crash.bin";

void save_and_die(int sig) {
    // Only async-signal-safe calls here.
    const int fd = ::open(g_crash_name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (g_current && g_current_size) {
            ssize_t r = ::write(fd, g_current, g_current_size);
            (void)r;
        }
        ::close(fd);
    }
    static const char msg[] = "replay: the target crashed; input saved (see crash-*.bin)\n";
    ssize_t r = ::write(2, msg, sizeof msg - 1);
    (void)r;
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

void run_one(const std::vector<uint8_t>& in, uint64_t seed, uint64_t iteration) {
    // Exactly sized heap copy, so reading past the end is a sanitizer finding.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[in.size() ? in.size() : 1]);
    if (!in.empty()) std::memcpy(copy.get(), in.data(), in.size());
    g_current = copy.get();
    g_current_size = in.size();
    std::snprintf(g_crash_name, sizeof g_crash_name, "crash-%llu-%llu.bin", static_cast<unsigned long long>(seed),
                  static_cast<unsigned long long>(iteration));
    LLVMFuzzerTestOneInput(copy.get(), in.size());
    g_current = nullptr;
}

std::vector<uint8_t> read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class Mutator {
public:
    explicit Mutator(uint64_t seed) : rng_(seed) {}

    std::vector<uint8_t> mutate(const std::vector<std::vector<uint8_t>>& corpus) {
        std::vector<uint8_t> b = corpus.empty() ? std::vector<uint8_t>{} : corpus[below(corpus.size())];
        const size_t n = 1 + below(4);
        for (size_t i = 0; i < n; ++i) step(b, corpus);
        return b;
    }

private:
    uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }

    void step(std::vector<uint8_t>& b, const std::vector<std::vector<uint8_t>>& corpus) {
        // Values that sit on the edges of sizes, counts and signedness.
        static const uint64_t k64[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff,
                                       0x100000000ull, 1ull << 62, 0x7fffffffffffffffull, 1ull << 63,
                                       0xfffffffffffffff0ull, ~0ull};
        switch (below(b.empty() ? 2 : 9)) {
            case 0: {  // insert random bytes
                const size_t at = below(b.size() + 1);
                const size_t n = 1 + below(16);
                std::vector<uint8_t> ins(n);
                for (auto& x : ins) x = static_cast<uint8_t>(rng_());
                b.insert(b.begin() + static_cast<ptrdiff_t>(at), ins.begin(), ins.end());
                break;
            }
            case 1: {  // splice: our head, another file's tail
                if (corpus.empty()) break;
                const auto& o = corpus[below(corpus.size())];
                const size_t cut = below(b.size() + 1);
                const size_t from = below(o.size() + 1);
                b.resize(cut);
                b.insert(b.end(), o.begin() + static_cast<ptrdiff_t>(from), o.end());
                break;
            }
            case 2: b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8)); break;  // bit flip
            case 3: b[below(b.size())] = static_cast<uint8_t>(rng_()); break;            // byte set
            case 4: {                                                                    // interesting byte
                static const uint8_t k8[] = {0, 1, 2, 3, 4, 7, 8, 9, 12, 13, 0x7f, 0x80, 0xfe, 0xff};
                b[below(b.size())] = k8[below(sizeof k8)];
                break;
            }
            case 5: b.resize(below(b.size())); break;  // truncate
            case 6: {                                   // erase a run
                const size_t at = below(b.size());
                const size_t n = 1 + below(std::min<size_t>(32, b.size() - at));
                b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
                break;
            }
            case 7: {  // u64 field: aligned positions hit real fields more often
                if (b.size() < 8) break;
                size_t at = below(b.size() - 7);
                if (rng_() & 1) at &= ~size_t{7};
                uint64_t v = k64[below(std::size(k64))];
                if (rng_() % 4 == 0) v = b.size() + below(3) - 1;  // "exactly the file" off by one
                std::memcpy(b.data() + at, &v, 8);
                break;
            }
            default: {  // u32 field
                if (b.size() < 4) break;
                size_t at = below(b.size() - 3);
                if (rng_() & 1) at &= ~size_t{3};
                const auto v = static_cast<uint32_t>(k64[below(std::size(k64))]);
                std::memcpy(b.data() + at, &v, 4);
                break;
            }
        }
    }

    std::mt19937_64 rng_;
};

[[noreturn]] void usage(const char* argv0) {
    std::fprintf(stderr, "usage: %s [--seconds S] [--iterations N] [--seed X] CORPUS_DIR_OR_FILE...\n", argv0);
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    double seconds = 20;
    uint64_t iterations = 20000;
    uint64_t seed = ds4::test::test_seed();
    std::vector<std::filesystem::path> inputs;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) usage(argv[0]);
            return argv[++i];
        };
        char* end = nullptr;
        if (a == "--seconds") {
            const char* v = next();
            seconds = std::strtod(v, &end);
        } else if (a == "--iterations") {
            const char* v = next();
            iterations = std::strtoull(v, &end, 10);
        } else if (a == "--seed") {
            const char* v = next();
            seed = std::strtoull(v, &end, 10);
        } else if (a.rfind("--", 0) == 0) {
            usage(argv[0]);
        } else {
            inputs.emplace_back(a);
        }
        if (end && *end) usage(argv[0]);
    }

    for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, save_and_die);

    std::vector<std::vector<uint8_t>> corpus;
    for (const auto& in : inputs) {
        std::error_code ec;
        if (std::filesystem::is_directory(in, ec)) {
            std::vector<std::filesystem::path> files;
            for (const auto& e : std::filesystem::recursive_directory_iterator(in))
                if (e.is_regular_file()) files.push_back(e.path());
            std::sort(files.begin(), files.end());
            for (const auto& f : files) corpus.push_back(read_file(f));
        } else if (std::filesystem::is_regular_file(in, ec)) {
            corpus.push_back(read_file(in));
        } else {
            std::fprintf(stderr, "replay: %s is neither a file nor a directory.\n", in.c_str());
            return 2;
        }
    }
    std::printf("replay: seed %llu, %zu corpus files, up to %llu iterations or %.0f s\n",
                static_cast<unsigned long long>(seed), corpus.size(), static_cast<unsigned long long>(iterations),
                seconds);
    std::fflush(stdout);

    for (size_t i = 0; i < corpus.size(); ++i) run_one(corpus[i], seed, i);

    Mutator m(seed);
    const auto start = std::chrono::steady_clock::now();
    uint64_t done = 0;
    for (; done < iterations; ++done) {
        if ((done & 63) == 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds)
            break;
        run_one(m.mutate(corpus), seed, corpus.size() + done);
    }
    std::printf("replay: %llu mutated inputs, no crash\n", static_cast<unsigned long long>(done));
    return 0;
}
