// The seed of a randomized test: fresh every run, so nothing can be tuned to
// one case, or DS4_TEST_SEED=N to re-run the case a failure printed. Every
// test prints its seed in a SCOPED_TRACE (shown on failure).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace ds4::test {

inline uint64_t test_seed() {
    if (const char* s = std::getenv("DS4_TEST_SEED"); s != nullptr && *s != '\0') {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(s, &end, 10);
        if (*end == '\0') return v;
        std::fprintf(stderr, "DS4_TEST_SEED must be a decimal integer, got '%s'\n", s);
        std::exit(2);
    }
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
}

// One seed for the whole test program, drawn once (fixtures that share
// generated files across tests use it; each test still prints it).
inline uint64_t process_seed() {
    static const uint64_t seed = test_seed();
    return seed;
}

// "seed N (DS4_TEST_SEED=N re-runs it)", for traces and messages.
inline std::string seed_note(uint64_t seed) {
    return "seed " + std::to_string(seed) + " (DS4_TEST_SEED=" + std::to_string(seed) + " re-runs it)";
}

}  // namespace ds4::test
