// compare_logits REF OTHER ROWS: two f32 logits dumps (ds4 --dump-logits) of
// ROWS positions; prints "max_rel_l2 argmax_agreement" (per position
// relative L2 of OTHER against REF, worst over positions; the fraction of
// positions whose top token agrees). Exit 1 when the files do not hold
// ROWS equal rows. For the integration tests' bounded comparisons.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

static std::vector<float> load(const char* path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return {};
    const std::streamsize n = in.tellg();
    std::vector<float> v(static_cast<size_t>(n) / sizeof(float));
    in.seekg(0);
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    return v;
}

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: compare_logits REF OTHER ROWS\n");
        return 2;
    }
    const std::vector<float> a = load(argv[1]), b = load(argv[2]);
    const long rows = std::atol(argv[3]);
    if (rows <= 0 || a.empty() || a.size() != b.size() || a.size() % static_cast<size_t>(rows) != 0) {
        std::fprintf(stderr, "compare_logits: %s and %s are not two dumps of %ld equal rows\n", argv[1], argv[2], rows);
        return 1;
    }
    const size_t v = a.size() / static_cast<size_t>(rows);
    double worst = 0;
    long agree = 0;
    for (long r = 0; r < rows; ++r) {
        const float* x = a.data() + r * v;
        const float* y = b.data() + r * v;
        double num = 0, den = 0;
        size_t ax = 0, ay = 0;
        for (size_t i = 0; i < v; ++i) {
            num += double(x[i] - y[i]) * double(x[i] - y[i]);
            den += double(x[i]) * double(x[i]);
            if (x[i] > x[ax]) ax = i;
            if (y[i] > y[ay]) ay = i;
        }
        const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
        if (!(rel <= worst)) worst = rel;  // NaN wins
        agree += ax == ay;
    }
    std::printf("%.4e %.4f\n", worst, double(agree) / double(rows));
    return 0;
}
