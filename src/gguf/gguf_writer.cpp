#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace ds4 {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr size_t kMaxTensorName = 63;  // ggml's GGML_MAX_NAME (64) less the terminator
constexpr const char* kAlignmentKey = "general.alignment";

uint64_t pad_to(uint64_t n, uint64_t al) { return (n + al - 1) / al * al; }

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

void check_alignment(uint64_t al) {
    if (!power_of_two(al) || al > std::numeric_limits<uint32_t>::max())
        throw Error("GGUF alignment " + std::to_string(al) + " is not a power of two that fits in 32 bits.");
}

// Range of an integer value type, for catching truncation before it happens.
bool int_fits(GgufValueType t, int64_t v) {
    switch (t) {
        case GgufValueType::U8: return v >= 0 && v <= 0xff;
        case GgufValueType::I8: return v >= -128 && v <= 127;
        case GgufValueType::U16: return v >= 0 && v <= 0xffff;
        case GgufValueType::I16: return v >= -32768 && v <= 32767;
        case GgufValueType::U32: return v >= 0 && v <= 0xffffffffll;
        case GgufValueType::I32: return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
        case GgufValueType::BOOL: return v == 0 || v == 1;
        default: return true;  // U64 (bit pattern) and I64 take any value
    }
}

void check_value(const std::string& key, const GgufValue& v, int depth) {
    auto bad = [&](const std::string& what) { throw Error("GGUF metadata key '" + key + "' " + what + "."); };
    if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(GgufValueType::F64))
        bad("has unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
    if (v.type != GgufValueType::ARRAY) {
        if (gguf_value_type_is_integer(v.type) && !int_fits(v.type, v.i))
            bad("has value " + std::to_string(v.i) + ", out of range for " + gguf_value_type_name(v.type));
        return;
    }
    if (depth >= 8) bad("has arrays nested more than 8 deep");
    const GgufValueType et = v.elem_type;
    if (static_cast<uint32_t>(et) > static_cast<uint32_t>(GgufValueType::F64))
        bad("is an array of unknown element type " + std::to_string(static_cast<uint32_t>(et)));
    const bool is_float = et == GgufValueType::F32 || et == GgufValueType::F64;
    const bool is_int = gguf_value_type_is_integer(et);
    // Exactly the vector chosen by the element type may hold elements;
    // anything else means the caller built the value wrongly.
    if ((!is_int && !v.ints.empty()) || (!is_float && !v.floats.empty()) ||
        (et != GgufValueType::STRING && !v.strings.empty()) || (et != GgufValueType::ARRAY && !v.arrays.empty()))
        bad(std::string("is an array of ") + gguf_value_type_name(et) + " with elements stored for another type");
    if (is_int)
        for (int64_t x : v.ints)
            if (!int_fits(et, x))
                bad("holds element " + std::to_string(x) + ", out of range for " + gguf_value_type_name(et));
    for (const GgufValue& a : v.arrays) {
        if (a.type != GgufValueType::ARRAY) bad("is an array of arrays holding a non-array element");
        check_value(key, a, depth + 1);
    }
}

}  // namespace

// Where the bytes go: a file through a buffer, or memory.
class GgufByteSink {
public:
    virtual ~GgufByteSink() = default;
    virtual void put(const void* p, size_t n) = 0;
    // A buffer of n bytes to fill in place, then handed to commit().
    virtual uint8_t* claim(size_t n) = 0;
    virtual void commit(size_t n) = 0;
    uint64_t pos() const { return pos_; }

    template <typename T>
    void scalar(T v) { put(&v, sizeof v); }
    void string(const std::string& s) {
        scalar<uint64_t>(s.size());
        put(s.data(), s.size());
    }
    void zeros(uint64_t n) {
        static const uint8_t z[256] = {};
        while (n > 0) {
            const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof z));
            put(z, k);
            n -= k;
        }
    }

protected:
    uint64_t pos_ = 0;
};

namespace {

class CountSink final : public GgufByteSink {
public:
    void put(const void*, size_t n) override { pos_ += n; }
    uint8_t* claim(size_t) override { return nullptr; }
    void commit(size_t n) override { pos_ += n; }
};

class MemorySink final : public GgufByteSink {
public:
    explicit MemorySink(std::vector<uint8_t>& out) : out_(out) {}
    void put(const void* p, size_t n) override {
        const auto* b = static_cast<const uint8_t*>(p);
        out_.insert(out_.end(), b, b + n);
        pos_ += n;
    }
    uint8_t* claim(size_t n) override {
        out_.resize(out_.size() + n);
        return out_.data() + out_.size() - n;
    }
    void commit(size_t n) override { pos_ += n; }

private:
    std::vector<uint8_t>& out_;
};

class FileSink final : public GgufByteSink {
public:
    FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(kBuf); }
    void put(const void* p, size_t n) override {
        const auto* b = static_cast<const uint8_t*>(p);
        if (buf_.size() + n > kBuf) flush();
        if (n >= kBuf) {
            write_all(b, n);
        } else {
            buf_.insert(buf_.end(), b, b + n);
        }
        pos_ += n;
    }
    uint8_t* claim(size_t n) override {
        flush();
        scratch_.resize(n);
        return scratch_.data();
    }
    void commit(size_t n) override {
        write_all(scratch_.data(), n);
        pos_ += n;
        // Let a multi-GB tensor's buffer go instead of keeping it for the next.
        if (scratch_.capacity() > kBuf) std::vector<uint8_t>().swap(scratch_);
    }
    void flush() {
        write_all(buf_.data(), buf_.size());
        buf_.clear();
    }

private:
    static constexpr size_t kBuf = size_t{1} << 20;
    void write_all(const uint8_t* p, size_t n) {
        while (n > 0) {
            const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0)
                throw Error("cannot write GGUF file " + path_ + ": " + (w < 0 ? std::strerror(errno) : "no progress") + ".");
            p += w;
            n -= static_cast<size_t>(w);
        }
    }
    int fd_;
    std::string path_;
    std::vector<uint8_t> buf_;
    std::vector<uint8_t> scratch_;
};

void emit_payload(GgufByteSink& out, const GgufValue& v);

void emit_scalar(GgufByteSink& out, GgufValueType t, int64_t i, double f) {
    switch (t) {
        case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: out.scalar<uint8_t>(static_cast<uint8_t>(i)); break;
        case GgufValueType::U16: case GgufValueType::I16: out.scalar<uint16_t>(static_cast<uint16_t>(i)); break;
        case GgufValueType::U32: case GgufValueType::I32: out.scalar<uint32_t>(static_cast<uint32_t>(i)); break;
        case GgufValueType::U64: case GgufValueType::I64: out.scalar<uint64_t>(static_cast<uint64_t>(i)); break;
        case GgufValueType::F32: out.scalar<float>(static_cast<float>(f)); break;
        case GgufValueType::F64: out.scalar<double>(f); break;
        default: break;
    }
}

// The value without its type tag: what follows the tag in a key/value pair,
// and what an element of an array of arrays is.
void emit_payload(GgufByteSink& out, const GgufValue& v) {
    switch (v.type) {
        case GgufValueType::STRING: out.string(v.str); return;
        case GgufValueType::ARRAY: break;
        default: emit_scalar(out, v.type, v.i, v.f); return;
    }
    out.scalar<uint32_t>(static_cast<uint32_t>(v.elem_type));
    out.scalar<uint64_t>(v.array_size());
    switch (v.elem_type) {
        case GgufValueType::STRING:
            for (const auto& s : v.strings) out.string(s);
            break;
        case GgufValueType::ARRAY:
            for (const auto& a : v.arrays) emit_payload(out, a);
            break;
        case GgufValueType::F32: case GgufValueType::F64:
            for (double x : v.floats) emit_scalar(out, v.elem_type, 0, x);
            break;
        default:
            for (int64_t x : v.ints) emit_scalar(out, v.elem_type, x, 0.0);
            break;
    }
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(kDefaultAlignment) {
    check_alignment(alignment);
    if (alignment != kDefaultAlignment) set(kAlignmentKey, GgufValue::u32(static_cast<uint32_t>(alignment)));
}

void GgufWriter::set(const std::string& key, GgufValue v) {
    if (key.empty()) throw Error("GGUF metadata keys must not be empty.");
    check_value(key, v, 0);
    if (key == kAlignmentKey) {
        if (v.type != GgufValueType::U32)
            throw Error(std::string("GGUF metadata key general.alignment must be u32, not ") + gguf_value_type_name(v.type) + ".");
        check_alignment(static_cast<uint64_t>(v.i));
        if (!tensors_.empty() && static_cast<uint64_t>(v.i) != alignment_)
            throw Error("general.alignment must be set before the first tensor is added.");
        alignment_ = static_cast<uint64_t>(v.i);
    }
    for (auto& [k, old] : kv_)
        if (k == key) {
            old = std::move(v);
            return;
        }
    kv_.emplace_back(key, std::move(v));
}

GgufWriter::Tensor& GgufWriter::declare(const std::string& name, GgmlType type, std::vector<int64_t> ne) {
    auto bad = [&](const std::string& what) { throw Error("GGUF tensor '" + name + "' " + what + "."); };
    if (name.empty()) throw Error("GGUF tensor names must not be empty.");
    if (name.size() > kMaxTensorName)
        bad("has a name of " + std::to_string(name.size()) + " bytes; ggml reads at most " + std::to_string(kMaxTensorName));
    for (const auto& t : tensors_)
        if (t.name == name) bad("is declared twice");
    const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
    if (!traits) bad("has unknown type " + std::to_string(static_cast<uint32_t>(type)));
    if (ne.empty() || ne.size() > 4) bad("has " + std::to_string(ne.size()) + " dimensions; GGUF allows 1 to 4");
    uint64_t elems = 1;
    for (int64_t n : ne) {
        if (n < 0) bad("has a negative dimension");
        if (n != 0 && elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(n))
            bad("has a shape whose element count overflows 63 bits");
        elems *= static_cast<uint64_t>(n);
    }
    if (ne[0] % traits->block_elems != 0)
        bad("has rows of " + std::to_string(ne[0]) + " elements, not a multiple of the " + std::string(traits->name) +
            " block size " + std::to_string(traits->block_elems));
    const uint64_t blocks = elems / static_cast<uint64_t>(traits->block_elems);
    if (blocks != 0 && traits->block_bytes > std::numeric_limits<size_t>::max() / 2 / blocks)
        bad("is too large to address");
    Tensor t;
    t.name = name;
    t.type = type;
    t.ne = std::move(ne);
    t.nbytes = static_cast<size_t>(blocks * traits->block_bytes);
    tensors_.push_back(std::move(t));
    return tensors_.back();
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                            std::function<void(uint8_t*, size_t)> fill) {
    if (!fill) throw Error("GGUF tensor '" + name + "' has no fill function.");
    declare(name, type, std::move(ne)).fill = std::move(fill);
}

void GgufWriter::add_tensor_streamed(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                                     std::function<void(uint64_t, uint8_t*, size_t)> fill) {
    if (!fill) throw Error("GGUF tensor '" + name + "' has no fill function.");
    declare(name, type, std::move(ne)).fill_range = std::move(fill);
}

void GgufWriter::add_tensor_bytes(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                                  std::vector<uint8_t> bytes) {
    Tensor& t = declare(name, type, std::move(ne));
    if (bytes.size() != t.nbytes) {
        const size_t want = t.nbytes;
        tensors_.pop_back();
        throw Error("GGUF tensor '" + name + "' needs " + std::to_string(want) + " bytes but " +
                    std::to_string(bytes.size()) + " were given.");
    }
    // std::function must be copyable: share the bytes instead of copying them.
    auto held = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    t.fill = [held](uint8_t* dst, size_t n) {
        if (n > 0) std::memcpy(dst, held->data(), n);  // an empty vector's data() may be null
    };
}

void GgufWriter::emit(GgufByteSink& out) const {
    out.scalar<uint32_t>(kGgufMagic);
    out.scalar<uint32_t>(kVersion);
    out.scalar<uint64_t>(tensors_.size());
    out.scalar<uint64_t>(kv_.size());
    for (const auto& [key, v] : kv_) {
        out.string(key);
        out.scalar<uint32_t>(static_cast<uint32_t>(v.type));
        emit_payload(out, v);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
        out.string(t.name);
        out.scalar<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t n : t.ne) out.scalar<uint64_t>(static_cast<uint64_t>(n));
        out.scalar<uint32_t>(static_cast<uint32_t>(t.type));
        out.scalar<uint64_t>(offset);
        offset += pad_to(t.nbytes, alignment_);
    }
    out.zeros(pad_to(out.pos(), alignment_) - out.pos());
    for (const auto& t : tensors_) {
        if (t.fill) {
            uint8_t* dst = out.claim(t.nbytes);
            if (dst) t.fill(dst, t.nbytes);
            out.commit(t.nbytes);
        } else {
            for (uint64_t done = 0; done < t.nbytes;) {
                const size_t n = static_cast<size_t>(std::min<uint64_t>(kStreamChunkBytes, t.nbytes - done));
                uint8_t* dst = out.claim(n);
                if (dst) t.fill_range(done, dst, n);
                out.commit(n);
                done += n;
            }
        }
        out.zeros(pad_to(t.nbytes, alignment_) - t.nbytes);
    }
}

uint64_t GgufWriter::file_size() const {
    CountSink c;
    emit(c);
    return c.pos();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out;
    out.reserve(static_cast<size_t>(file_size()));
    MemorySink sink(out);
    emit(sink);
    return out;
}

void GgufWriter::write(const std::string& path) const {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot create GGUF file " + path + ": " + std::strerror(errno) + ".");
    try {
        FileSink sink(fd, path);
        emit(sink);
        sink.flush();
    } catch (...) {
        // A half-written model file would only fail later, far from the cause.
        ::close(fd);
        ::unlink(path.c_str());
        throw;
    }
    if (::close(fd) != 0) {
        const int e = errno;
        ::unlink(path.c_str());
        throw Error("cannot write GGUF file " + path + ": " + std::strerror(e) + ".");
    }
}

}  // namespace ds4
