#include "pipeline/activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "quant/quant.h"

namespace ds4 {

namespace {
int64_t scale_blocks(int64_t cols) { return (cols + kScaleBlock - 1) / kScaleBlock; }
}  // namespace

void encode_activations(std::span<const float> values, int64_t rows, int64_t cols, int bits,
                        wire::Activations& out) {
    if (rows < 0 || cols < 0 || static_cast<int64_t>(values.size()) != rows * cols)
        throw Error("activations of " + std::to_string(values.size()) + " values are not " + std::to_string(rows) +
                    " x " + std::to_string(cols) + ".");
    out.set_rows(rows);
    out.set_cols(cols);
    out.set_bits(bits);
    std::string* data = out.mutable_data();
    out.clear_scales();
    const size_t n = values.size();
    // A non-finite hidden value is a bug upstream; sending it on would turn
    // into garbage logits far from its cause. f16 also tops out at 65504.
    for (size_t i = 0; i < n; ++i) {
        const float v = values[i];
        if (!std::isfinite(v) || (bits == 16 && std::fabs(v) > 65504.0f))
            throw Error("a hidden value of " + std::to_string(v) + " cannot travel as " + std::to_string(bits) +
                        "-bit activations" + (bits == 16 ? " (f16 holds up to 65504; use 32 or 8 bits)." : "."));
    }
    if (bits == 32) {
        data->resize(n * sizeof(float));
        if (n) std::memcpy(data->data(), values.data(), n * sizeof(float));
    } else if (bits == 16) {
        data->resize(n * sizeof(uint16_t));
        std::vector<uint16_t> h(n);
        fp32_to_fp16_row(values.data(), h.data(), static_cast<int64_t>(n));
        if (n) std::memcpy(data->data(), h.data(), n * sizeof(uint16_t));
    } else if (bits == 8) {
        // Symmetric int8 with one scale per block of kScaleBlock values of a
        // row: a residual stream carries a few outlier dimensions hundreds
        // of times larger than the rest, and one scale per row would round
        // everything else to zero.
        data->resize(n);
        std::string* scales = out.mutable_scales();
        const int64_t blocks = rows * scale_blocks(cols);
        scales->resize(static_cast<size_t>(blocks) * sizeof(float));
        int64_t k = 0;
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c0 = 0; c0 < cols; c0 += kScaleBlock, ++k) {
                const int64_t c1 = std::min(cols, c0 + kScaleBlock);
                const float* x = values.data() + r * cols;
                float amax = 0;
                for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[c]));
                const float scale = amax > 0 ? amax / 127.0f : 1.0f;
                std::memcpy(scales->data() + k * sizeof(float), &scale, sizeof(float));
                for (int64_t c = c0; c < c1; ++c) {
                    const float q = std::nearbyint(std::clamp(x[c] / scale, -127.0f, 127.0f));
                    (*data)[static_cast<size_t>(r * cols + c)] = static_cast<char>(static_cast<int8_t>(q));
                }
            }
        }
    } else {
        throw Error("activations travel as 32, 16 or 8 bits, not " + std::to_string(bits) + ".");
    }
}

std::vector<float> decode_activations(const wire::Activations& a) {
    const int64_t rows = a.rows(), cols = a.cols();
    if (rows < 0 || cols < 0 || (cols > 0 && rows > (int64_t{1} << 40) / cols))
        throw Error("a pipeline message carries activations of an impossible shape (" + std::to_string(rows) + " x " +
                    std::to_string(cols) + ").");
    const size_t n = static_cast<size_t>(rows * cols);
    const int bits = a.bits();
    if (bits != 32 && bits != 16 && bits != 8)
        throw Error("a pipeline message carries " + std::to_string(bits) + "-bit activations (32, 16 or 8 expected).");
    const size_t want = n * static_cast<size_t>(bits / 8);
    if (a.data().size() != want ||
        (bits == 8 && a.scales().size() != static_cast<size_t>(rows * scale_blocks(cols)) * sizeof(float)))
        throw Error("a pipeline message's activations hold " + std::to_string(a.data().size()) + " bytes, not the " +
                    std::to_string(want) + " that " + std::to_string(rows) + " x " + std::to_string(cols) + " at " +
                    std::to_string(bits) + " bits need.");
    std::vector<float> out(n);
    if (bits == 32) {
        if (n) std::memcpy(out.data(), a.data().data(), n * sizeof(float));
    } else if (bits == 16) {
        std::vector<uint16_t> h(n);
        if (n) std::memcpy(h.data(), a.data().data(), n * sizeof(uint16_t));
        fp16_to_fp32_row(h.data(), out.data(), static_cast<int64_t>(n));
    } else {
        int64_t k = 0;
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c0 = 0; c0 < cols; c0 += kScaleBlock, ++k) {
                float scale;
                std::memcpy(&scale, a.scales().data() + k * sizeof(float), sizeof(float));
                for (int64_t c = c0; c < std::min(cols, c0 + kScaleBlock); ++c)
                    out[static_cast<size_t>(r * cols + c)] =
                        scale * static_cast<float>(static_cast<int8_t>(a.data()[static_cast<size_t>(r * cols + c)]));
            }
        }
    }
    return out;
}

uint64_t activation_bytes(const wire::Activations& a) { return a.data().size() + a.scales().size(); }

uint64_t result_bytes(const wire::Result& r) {
    uint64_t b = activation_bytes(r.output());
    for (const wire::Candidates& c : r.best()) b += 4 * uint64_t(c.ids_size() + c.logits_size());
    return b;
}

bool state_tensor_from_bytes(const std::string& bytes, StateFloats& out) {
    if (bytes.size() % sizeof(float) != 0) return false;
    out.resize(bytes.size() / sizeof(float));
    // memcpy's pointers must not be null even for zero bytes (an empty
    // vector's data() may be).
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return true;
}

}  // namespace ds4
