#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace ds4 {

namespace {

constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr int kMaxArrayNesting = 8;
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 30;  // ggml's GGUF_MAX_ARRAY_ELEMENTS
// Counts come from the file; reserving by them alone would let one corrupt
// number in a 400 GiB file ask for terabytes. Vectors grow past this as the
// entries are actually read.
constexpr uint64_t kMaxReserve = 1 << 16;

// A name from the file as it goes into an error sentence: binary garbage or
// a megabyte-long name must not turn the sentence into noise.
std::string printable(const std::string& s) {
    constexpr size_t kMax = 80;
    std::string out;
    for (size_t i = 0; i < s.size() && i < kMax; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    if (s.size() > kMax) out += "...";
    return out;
}

// Reads the header bytes either from memory or through pread with a buffer,
// so a 400 GiB file costs one small read, not a mapping of everything.
class ByteSource {
public:
    virtual ~ByteSource() = default;
    // Copies n bytes at `off`; false when they lie past the end.
    virtual bool read(uint64_t off, void* dst, size_t n) = 0;
};

class MemorySource final : public ByteSource {
public:
    MemorySource(const uint8_t* d, size_t n) : data_(d), size_(n) {}
    bool read(uint64_t off, void* dst, size_t n) override {
        if (off > size_ || n > size_ - off) return false;
        if (n > 0) std::memcpy(dst, data_ + off, n);
        return true;
    }

private:
    const uint8_t* data_;
    size_t size_;
};

class FileSource final : public ByteSource {
public:
    FileSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
    bool read(uint64_t off, void* dst, size_t n) override {
        if (off > size_ || n > size_ - off) return false;
        auto* out = static_cast<uint8_t*>(dst);
        while (n > 0) {
            if (off < buf_off_ || off >= buf_off_ + buf_.size()) refill(off);
            size_t avail = static_cast<size_t>(buf_off_ + buf_.size() - off);
            size_t take = std::min(avail, n);
            std::memcpy(out, buf_.data() + (off - buf_off_), take);
            out += take;
            off += take;
            n -= take;
        }
        return true;
    }

private:
    void refill(uint64_t off) {
        constexpr size_t kChunk = 1 << 20;
        size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, size_ - off));
        buf_.resize(want);
        size_t got = 0;
        while (got < want) {
            ssize_t r = ::pread(fd_, buf_.data() + got, want - got, static_cast<off_t>(off + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0)
                throw Error(path_ + ": read failed at byte " + std::to_string(off + got) + " (" +
                            (r < 0 ? std::strerror(errno) : "unexpected end of file") + ").");
            got += static_cast<size_t>(r);
        }
        buf_off_ = off;
    }

    int fd_;
    uint64_t size_;
    std::string path_;
    std::vector<uint8_t> buf_;
    uint64_t buf_off_ = 0;
};

}  // namespace

size_t GgufTensorInfo::row_bytes() const { return ggml_row_bytes(type, ne[0]); }

class GgufParser {
public:
    GgufParser(ByteSource& src, GgufFile& f) : src_(src), f_(f) {}

    void run() {
        const uint32_t magic = u32("the magic number");
        if (magic != kGgufMagic) fail("is not a GGUF file (bad magic number)");
        f_.version_ = u32("the version");
        if (f_.version_ != 2 && f_.version_ != 3)
            fail("has GGUF version " + std::to_string(f_.version_) + "; only versions 2 and 3 are supported");
        const uint64_t n_tensors = u64("the tensor count");
        const uint64_t n_kv = u64("the metadata count");
        // Each entry needs at least 8 bytes of header: reject absurd counts
        // before reserving anything.
        if (n_tensors > f_.file_size_ / 8 || n_kv > f_.file_size_ / 8)
            fail("is truncated or corrupt: it declares " + std::to_string(n_tensors) + " tensors and " + std::to_string(n_kv) +
                 " metadata entries, more than the file can hold");

        f_.kv_.reserve(std::min(n_kv, kMaxReserve));
        for (uint64_t k = 0; k < n_kv; ++k) {
            std::string key = str("a metadata key");
            if (key.empty()) fail("has an empty metadata key (entry " + std::to_string(k) + ")");
            const std::string shown = printable(key);
            const uint32_t t = u32("the type of metadata key '" + shown + "'");
            if (!gguf_value_type_valid(t))
                fail("has metadata key '" + shown + "' of unknown value type " + std::to_string(t));
            GgufValue v = value(static_cast<GgufValueType>(t), shown, 0);
            f_.kv_.emplace_back(std::move(key), std::move(v));
        }
        index_metadata();

        if (const GgufValue* a = f_.find("general.alignment")) {
            if (a->type != GgufValueType::U32)
                fail("has general.alignment of type " + std::string(gguf_value_type_name(a->type)) + "; it must be u32");
            const uint64_t al = static_cast<uint32_t>(a->i);
            if (al == 0 || (al & (al - 1)) != 0)
                fail("has general.alignment " + std::to_string(al) + ", which is not a power of two");
            f_.alignment_ = al;
        }

        f_.tensors_.reserve(std::min(n_tensors, kMaxReserve));
        for (uint64_t t = 0; t < n_tensors; ++t) f_.tensors_.push_back(tensor_info());

        const uint64_t al = f_.alignment_;
        f_.data_offset_ = (pos_ + al - 1) / al * al;
        if (n_tensors > 0 && f_.data_offset_ > f_.file_size_)
            fail("is truncated: its tensor data section would start at byte " + std::to_string(f_.data_offset_) +
                 " but the file has " + std::to_string(f_.file_size_) + " bytes");
        place_tensors();
    }

private:
    [[noreturn]] void fail(const std::string& what) const { throw Error(f_.path_ + " " + what + "."); }

    void raw(void* dst, size_t n, const std::string& what) {
        if (!src_.read(pos_, dst, n))
            fail("is truncated: it ends at byte " + std::to_string(f_.file_size_) + " while reading " + what);
        pos_ += n;
    }
    uint32_t u32(const std::string& what) { uint32_t v; raw(&v, 4, what); return v; }
    uint64_t u64(const std::string& what) { uint64_t v; raw(&v, 8, what); return v; }

    std::string str(const std::string& what) {
        const uint64_t n = u64("the length of " + what);
        if (n > kMaxStringBytes || n > f_.file_size_ - std::min(pos_, f_.file_size_))
            fail("is truncated or corrupt: " + what + " claims " + std::to_string(n) + " bytes");
        std::string s(static_cast<size_t>(n), '\0');
        raw(s.data(), s.size(), what);
        return s;
    }

    int64_t scalar_int(GgufValueType t, const std::string& key) {
        uint8_t b[8] = {};
        raw(b, gguf_value_type_size(t), "the value of '" + key + "'");
        return decode_int(t, b, key);
    }

    int64_t decode_int(GgufValueType t, const uint8_t* b, const std::string& key) const {
        switch (t) {
            case GgufValueType::U8: return b[0];
            case GgufValueType::I8: return static_cast<int8_t>(b[0]);
            case GgufValueType::BOOL:
                if (b[0] > 1) fail("has metadata key '" + key + "' with a bool value of " + std::to_string(b[0]));
                return b[0];
            case GgufValueType::U16: { uint16_t v; std::memcpy(&v, b, 2); return v; }
            case GgufValueType::I16: { int16_t v; std::memcpy(&v, b, 2); return v; }
            case GgufValueType::U32: { uint32_t v; std::memcpy(&v, b, 4); return v; }
            case GgufValueType::I32: { int32_t v; std::memcpy(&v, b, 4); return v; }
            case GgufValueType::U64: case GgufValueType::I64: { int64_t v; std::memcpy(&v, b, 8); return v; }
            default: return 0;
        }
    }

    double scalar_float(GgufValueType t, const std::string& key) {
        uint8_t b[8];
        raw(b, gguf_value_type_size(t), "the value of '" + key + "'");
        return decode_float(t, b);
    }

    static double decode_float(GgufValueType t, const uint8_t* b) {
        if (t == GgufValueType::F32) { float v; std::memcpy(&v, b, 4); return v; }
        double v;
        std::memcpy(&v, b, 8);
        return v;
    }

    // Arrays of numbers are read in blocks: a 150k-entry vocabulary array
    // must not cost one read (and one message string) per element.
    template <typename Decode>
    void scalar_elements(GgufValueType t, uint64_t n, const std::string& key, Decode&& decode) {
        const size_t sz = gguf_value_type_size(t);
        uint8_t buf[8192];
        const std::string what = "the elements of '" + key + "'";
        while (n > 0) {
            const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof buf / sz));
            raw(buf, k * sz, what);
            for (size_t j = 0; j < k; ++j) decode(buf + j * sz);
            n -= k;
        }
    }

    GgufValue value(GgufValueType t, const std::string& key, int depth) {
        GgufValue v;
        v.type = t;
        if (t == GgufValueType::STRING) {
            v.str = str("the value of '" + key + "'");
        } else if (t == GgufValueType::F32 || t == GgufValueType::F64) {
            v.f = scalar_float(t, key);
        } else if (t == GgufValueType::ARRAY) {
            if (depth >= kMaxArrayNesting) fail("has metadata key '" + key + "' with arrays nested too deeply");
            const uint32_t et = u32("the element type of '" + key + "'");
            if (!gguf_value_type_valid(et))
                fail("has metadata array '" + key + "' of unknown element type " + std::to_string(et));
            v.elem_type = static_cast<GgufValueType>(et);
            const uint64_t n = u64("the length of '" + key + "'");
            // Every element takes at least its scalar size; a string its 8-byte
            // length, an array its 4-byte type and 8-byte length.
            size_t min_elem = gguf_value_type_size(v.elem_type);
            if (v.elem_type == GgufValueType::STRING) min_elem = 8;
            if (v.elem_type == GgufValueType::ARRAY) min_elem = 12;
            const uint64_t left = f_.file_size_ - std::min(pos_, f_.file_size_);
            if (n > left / min_elem)
                fail("is truncated or corrupt: metadata array '" + key + "' claims " + std::to_string(n) + " elements");
            if (n > kMaxArrayElements)
                fail("has metadata array '" + key + "' of " + std::to_string(n) + " elements, more than the 2^30 ggml allows");
            const size_t reserve = static_cast<size_t>(std::min(n, kMaxReserve));
            switch (v.elem_type) {
                case GgufValueType::STRING:
                    v.strings.reserve(reserve);
                    for (uint64_t i = 0; i < n; ++i) v.strings.push_back(str("an element of '" + key + "'"));
                    break;
                case GgufValueType::ARRAY:
                    v.arrays.reserve(reserve);
                    for (uint64_t i = 0; i < n; ++i) v.arrays.push_back(value(GgufValueType::ARRAY, key, depth + 1));
                    break;
                case GgufValueType::F32: case GgufValueType::F64:
                    v.floats.reserve(reserve);
                    scalar_elements(v.elem_type, n, key, [&](const uint8_t* b) { v.floats.push_back(decode_float(v.elem_type, b)); });
                    break;
                default:
                    v.ints.reserve(reserve);
                    scalar_elements(v.elem_type, n, key, [&](const uint8_t* b) { v.ints.push_back(decode_int(v.elem_type, b, key)); });
                    break;
            }
        } else {
            v.i = scalar_int(t, key);
        }
        return v;
    }

    void index_metadata() {
        auto& idx = f_.kv_index_sorted_;
        idx.resize(f_.kv_.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return f_.kv_[a].first < f_.kv_[b].first; });
        for (size_t i = 1; i < idx.size(); ++i)
            if (f_.kv_[idx[i]].first == f_.kv_[idx[i - 1]].first)
                fail("has metadata key '" + printable(f_.kv_[idx[i]].first) + "' twice");
    }

    GgufTensorInfo tensor_info() {
        GgufTensorInfo ti;
        ti.name = str("a tensor name");
        if (ti.name.empty()) fail("has a tensor with an empty name");
        ti.n_dims = u32("the dimension count of tensor '" + printable(ti.name) + "'");
        if (ti.n_dims > static_cast<uint32_t>(kGgufMaxDims))
            fail("has tensor '" + printable(ti.name) + "' with " + std::to_string(ti.n_dims) + " dimensions (at most 4)");
        for (uint32_t d = 0; d < ti.n_dims; ++d) {
            const uint64_t n = u64("the shape of tensor '" + printable(ti.name) + "'");
            if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                fail("has tensor '" + printable(ti.name) + "' with a negative dimension");
            ti.ne[d] = static_cast<int64_t>(n);
        }
        const uint32_t type = u32("the type of tensor '" + printable(ti.name) + "'");
        const auto traits = ggml_type_traits(type);
        if (!traits) fail("has tensor '" + printable(ti.name) + "' of unknown type " + std::to_string(type));
        ti.type = static_cast<GgmlType>(type);
        ti.offset = u64("the offset of tensor '" + printable(ti.name) + "'");

        // Element count and byte size without overflow. The product of the
        // non-zero dimensions must fit too: a zero dimension makes the tensor
        // empty, but products of the other dimensions (rows, n_elements()
        // in any order) must still be representable.
        uint64_t nonzero = 1;
        uint64_t elems = 1;
        for (int d = 0; d < kGgufMaxDims; ++d) {
            const uint64_t n = static_cast<uint64_t>(ti.ne[d]);
            if (n != 0 && nonzero > std::numeric_limits<int64_t>::max() / n)
                fail("has tensor '" + printable(ti.name) + "' whose shape overflows 63 bits");
            if (n != 0) nonzero *= n;
            elems *= n;
        }
        if (ti.ne[0] % traits->block_elems != 0)
            fail("has tensor '" + printable(ti.name) + "' with rows of " + std::to_string(ti.ne[0]) + " elements, not a multiple of the " +
                 std::string(traits->name) + " block size " + std::to_string(traits->block_elems));
        const uint64_t blocks = elems / static_cast<uint64_t>(traits->block_elems);
        if (blocks != 0 && traits->block_bytes > std::numeric_limits<uint64_t>::max() / blocks)
            fail("has tensor '" + printable(ti.name) + "' whose byte size overflows 64 bits");
        ti.nbytes = blocks * traits->block_bytes;
        if (ti.offset % f_.alignment_ != 0)
            fail("has tensor '" + printable(ti.name) + "' at offset " + std::to_string(ti.offset) + ", not aligned to " +
                 std::to_string(f_.alignment_));
        return ti;
    }

    void place_tensors() {
        auto& ts = f_.tensors_;
        const uint64_t data_bytes = f_.file_size_ - std::min(f_.data_offset_, f_.file_size_);
        for (auto& t : ts) {
            if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset)
                fail("is truncated or corrupt: tensor '" + printable(t.name) + "' (" + std::to_string(t.nbytes) + " bytes at data offset " +
                     std::to_string(t.offset) + ") lies outside the file");
            t.file_offset = f_.data_offset_ + t.offset;
        }
        auto& idx = f_.tensor_index_sorted_;
        idx.resize(ts.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return ts[a].name < ts[b].name; });
        for (size_t i = 1; i < idx.size(); ++i)
            if (ts[idx[i]].name == ts[idx[i - 1]].name) fail("has tensor '" + printable(ts[idx[i]].name) + "' twice");

        std::vector<size_t> by_off(ts.size());
        for (size_t i = 0; i < by_off.size(); ++i) by_off[i] = i;
        std::sort(by_off.begin(), by_off.end(), [&](size_t a, size_t b) { return ts[a].offset < ts[b].offset; });
        // Compare each tensor with the one reaching furthest so far, not only
        // its neighbour: an empty tensor sorted between two overlapping ones
        // must not hide the overlap.
        const GgufTensorInfo* furthest = nullptr;
        for (size_t i : by_off) {
            const auto& b = ts[i];
            if (b.nbytes == 0) continue;
            if (furthest && furthest->offset + furthest->nbytes > b.offset)
                fail("has overlapping tensors '" + printable(furthest->name) + "' and '" + printable(b.name) + "'");
            if (!furthest || b.offset + b.nbytes > furthest->offset + furthest->nbytes) furthest = &b;
        }
    }

    ByteSource& src_;
    GgufFile& f_;
    uint64_t pos_ = 0;
};

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot open model file " + path + ": " + std::strerror(errno) + ".");
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->fd_ = fd;
    f->path_ = path;
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw Error("cannot stat model file " + path + ": " + std::strerror(errno) + ".");
    if (!S_ISREG(st.st_mode)) throw Error("model file " + path + " is not a regular file.");
    f->file_size_ = static_cast<uint64_t>(st.st_size);
    FileSource src(fd, f->file_size_, path);
    GgufParser(src, *f).run();
    return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = name;
    f->file_size_ = size;
    MemorySource src(data, size);
    GgufParser(src, *f).run();
    return f;
}

GgufFile::~GgufFile() {
    if (fd_ >= 0) ::close(fd_);
}

const GgufValue* GgufFile::find(const std::string& key) const {
    auto it = std::lower_bound(kv_index_sorted_.begin(), kv_index_sorted_.end(), key,
                               [&](size_t i, const std::string& k) { return kv_[i].first < k; });
    if (it == kv_index_sorted_.end() || kv_[*it].first != key) return nullptr;
    return &kv_[*it].second;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, const std::string& key, GgufValueType t, const char* want) {
    throw Error(path + " has metadata key '" + key + "' of type " + gguf_value_type_name(t) + " where " + want +
                " is expected.");
}
}  // namespace

std::optional<uint64_t> GgufFile::get_uint(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!gguf_value_type_is_integer(v->type) || v->type == GgufValueType::BOOL)
        wrong_type(path_, key, v->type, "an unsigned integer");
    const bool is_signed = v->type == GgufValueType::I8 || v->type == GgufValueType::I16 ||
                           v->type == GgufValueType::I32 || v->type == GgufValueType::I64;
    if (is_signed && v->i < 0) throw Error(path_ + " has a negative value for metadata key '" + key + "'.");
    return static_cast<uint64_t>(v->i);
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!gguf_value_type_is_integer(v->type) || v->type == GgufValueType::BOOL)
        wrong_type(path_, key, v->type, "an integer");
    if (v->type == GgufValueType::U64 && v->i < 0)
        throw Error(path_ + " has metadata key '" + key + "' too large for a signed integer.");
    return v->i;
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (v->type == GgufValueType::F32 || v->type == GgufValueType::F64) return v->f;
    if (gguf_value_type_is_integer(v->type) && v->type != GgufValueType::BOOL) {
        if (v->type == GgufValueType::U64) return static_cast<double>(static_cast<uint64_t>(v->i));
        return static_cast<double>(v->i);
    }
    wrong_type(path_, key, v->type, "a number");
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != GgufValueType::BOOL) wrong_type(path_, key, v->type, "a bool");
    return v->i != 0;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != GgufValueType::STRING) wrong_type(path_, key, v->type, "a string");
    return v->str;
}

namespace {
[[noreturn]] void missing(const std::string& path, const std::string& key) {
    throw Error(path + " lacks metadata key '" + key + "'.");
}
}  // namespace

uint64_t GgufFile::require_uint(const std::string& key) const {
    auto v = get_uint(key);
    if (!v) missing(path_, key);
    return *v;
}

double GgufFile::require_float(const std::string& key) const {
    auto v = get_float(key);
    if (!v) missing(path_, key);
    return *v;
}

std::string GgufFile::require_string(const std::string& key) const {
    auto v = get_string(key);
    if (!v) missing(path_, key);
    return *v;
}

const GgufValue& GgufFile::require_array(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) missing(path_, key);
    if (v->type != GgufValueType::ARRAY) wrong_type(path_, key, v->type, "an array");
    return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
    auto it = std::lower_bound(tensor_index_sorted_.begin(), tensor_index_sorted_.end(), name,
                               [&](size_t i, const std::string& n) { return tensors_[i].name < n; });
    if (it == tensor_index_sorted_.end() || tensors_[*it].name != name) return nullptr;
    return &tensors_[*it];
}

const GgufTensorInfo& GgufFile::require_tensor(const std::string& name) const {
    const GgufTensorInfo* t = find_tensor(name);
    if (!t) throw Error(path_ + " lacks tensor '" + name + "'.");
    return *t;
}

uint64_t GgufFile::tensor_data_bytes() const {
    uint64_t s = 0;
    for (const auto& t : tensors_) s += t.nbytes;
    return s;
}

}  // namespace ds4
