#include "engine/snapshot_file.h"

#include <fcntl.h>
#include <lz4.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace ds4 {

namespace {

constexpr char kMagic[8] = {'D', 'S', '4', 'S', 'N', 'A', 'P', '\n'};
constexpr char kTrailerMagic[8] = {'D', 'S', '4', 'S', 'E', 'N', 'D', '\n'};
constexpr uint32_t kVersion = 2;  // 2: the later pipeline stages' parts
constexpr uint32_t kOldestVersion = 1;
constexpr uint64_t kFrameBytes = uint64_t{64} << 20;  // raw bytes per compressed frame
// Bounds a hostile or corrupt header cannot pass: far above any real state.
constexpr uint64_t kMaxIdentity = 256;
constexpr uint64_t kMaxTokens = uint64_t{1} << 26;
constexpr uint64_t kMaxTensors = uint64_t{1} << 16;
constexpr uint64_t kMaxParts = 1024;  // stages of one route
constexpr uint64_t kMaxFloats = uint64_t{1} << 40;
constexpr int kZstdLevel = 1;  // snapshot floats barely compress; speed matters more

std::string errno_text() { return std::strerror(errno); }

// Appends the little-endian bytes of v (x86 and ARM hosts both are).
template <class T>
void put(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

class FdWriter {
public:
    FdWriter(int fd, const std::string& path) : fd_(fd), path_(path) {}
    void write(const void* p, size_t n) {
        const char* c = static_cast<const char*>(p);
        while (n > 0) {
            const ssize_t w = ::write(fd_, c, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) throw Error("writing the KV cache file " + path_ + " failed: " + errno_text());
            c += w;
            n -= static_cast<size_t>(w);
        }
    }

private:
    int fd_;
    const std::string& path_;
};

// Reads a file front to back; running out of bytes is a truncated file.
class FdReader {
public:
    explicit FdReader(const std::string& path) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) throw Error("cannot open the KV cache file " + path + ": " + errno_text());
    }
    ~FdReader() { ::close(fd_); }
    FdReader(const FdReader&) = delete;
    FdReader& operator=(const FdReader&) = delete;

    void read(void* p, size_t n) {
        char* c = static_cast<char*>(p);
        while (n > 0) {
            const ssize_t r = ::read(fd_, c, n);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) throw Error("reading the KV cache file " + path_ + " failed: " + errno_text());
            if (r == 0) throw Error("the KV cache file " + path_ + " is truncated.");
            c += r;
            n -= static_cast<size_t>(r);
            offset_ += static_cast<uint64_t>(r);
        }
    }
    template <class T>
    T get(std::string* copy = nullptr) {
        T v;
        read(&v, sizeof v);
        if (copy) put(*copy, v);
        return v;
    }
    uint64_t offset() const { return offset_; }
    // The file's last n bytes, without moving the read position; false when
    // the file is shorter.
    bool tail(void* p, size_t n, uint64_t& size) {
        struct stat st {};
        if (::fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < n) return false;
        size = static_cast<uint64_t>(st.st_size);
        return ::pread(fd_, p, n, st.st_size - static_cast<off_t>(n)) == static_cast<ssize_t>(n);
    }
    bool at_end() {
        char c;
        ssize_t r;
        do r = ::read(fd_, &c, 1);
        while (r < 0 && errno == EINTR);
        return r == 0;
    }

private:
    int fd_ = -1;
    const std::string& path_;
    uint64_t offset_ = 0;
};

// XXH3 over the payload's bytes as they stream past, freed on any exit.
class PayloadHash {
public:
    PayloadHash() : st_(XXH3_createState()) {
        if (!st_) throw Error("out of memory for a KV snapshot's hash state.");
        XXH3_64bits_reset(st_);
    }
    ~PayloadHash() { XXH3_freeState(st_); }
    PayloadHash(const PayloadHash&) = delete;
    PayloadHash& operator=(const PayloadHash&) = delete;
    void update(const std::string& bytes) { XXH3_64bits_update(st_, bytes.data(), bytes.size()); }
    uint64_t digest() const { return XXH3_64bits_digest(st_); }

private:
    XXH3_state_t* st_;
};

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
    throw Error("the KV cache file " + path + " is not a usable snapshot: " + what + ".");
}

// Compresses one frame of raw bytes; returns the packed bytes.
std::string pack(SnapshotCodec codec, const char* raw, size_t n) {
    std::string out;
    if (codec == SnapshotCodec::zstd) {
        out.resize(ZSTD_compressBound(n));
        const size_t k = ZSTD_compress(out.data(), out.size(), raw, n, kZstdLevel);
        if (ZSTD_isError(k)) throw Error(std::string("zstd could not compress a KV snapshot: ") + ZSTD_getErrorName(k));
        out.resize(k);
    } else {
        out.resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(n))));
        const int k = LZ4_compress_default(raw, out.data(), static_cast<int>(n), static_cast<int>(out.size()));
        if (k <= 0) throw Error("lz4 could not compress a KV snapshot.");
        out.resize(static_cast<size_t>(k));
    }
    return out;
}

// Decompresses one frame into exactly n raw bytes, or says the frame is bad.
bool unpack(SnapshotCodec codec, const std::string& packed, char* raw, size_t n) {
    if (codec == SnapshotCodec::zstd) {
        const size_t k = ZSTD_decompress(raw, n, packed.data(), packed.size());
        return !ZSTD_isError(k) && k == n;
    }
    const int k = LZ4_decompress_safe(packed.data(), raw, static_cast<int>(packed.size()), static_cast<int>(n));
    return k >= 0 && static_cast<size_t>(k) == n;
}

void fsync_dir(const std::string& path) {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;  // the rename stands; only its durability across a power cut is weaker
    ::fsync(fd);
    ::close(fd);
}

SnapshotFileHeader read_header(FdReader& in, const std::string& path) {
    std::string h;  // the header's bytes as read, for its hash
    char magic[8];
    in.read(magic, sizeof magic);
    if (std::memcmp(magic, kMagic, sizeof magic) != 0) corrupt(path, "it does not start with a ds4 snapshot's magic");
    h.append(magic, sizeof magic);
    const auto version = in.get<uint32_t>(&h);
    if (version < kOldestVersion || version > kVersion)
        corrupt(path, "it is version " + std::to_string(version) + ", this ds4 reads versions " +
                          std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
    SnapshotFileHeader hd;
    hd.version = version;
    const auto codec = in.get<uint32_t>(&h);
    if (codec != static_cast<uint32_t>(SnapshotCodec::zstd) && codec != static_cast<uint32_t>(SnapshotCodec::lz4))
        corrupt(path, "unknown compression " + std::to_string(codec));
    hd.codec = static_cast<SnapshotCodec>(codec);
    const auto id_len = in.get<uint64_t>(&h);
    if (id_len > kMaxIdentity) corrupt(path, "a model identity of " + std::to_string(id_len) + " bytes");
    hd.model_identity.resize(id_len);
    in.read(hd.model_identity.data(), id_len);
    h += hd.model_identity;
    hd.n_past = in.get<int64_t>(&h);
    const auto n_tokens = in.get<uint64_t>(&h);
    if (n_tokens > kMaxTokens || hd.n_past < 0 || static_cast<uint64_t>(hd.n_past) != n_tokens)
        corrupt(path, std::to_string(n_tokens) + " tokens for " + std::to_string(hd.n_past) + " positions");
    hd.tokens.resize(n_tokens);
    in.read(hd.tokens.data(), n_tokens * sizeof(int32_t));
    h.append(reinterpret_cast<const char*>(hd.tokens.data()), n_tokens * sizeof(int32_t));
    const auto n_tensors = in.get<uint64_t>(&h);
    if (n_tensors > kMaxTensors) corrupt(path, std::to_string(n_tensors) + " tensors");
    hd.tensor_floats.resize(n_tensors);
    uint64_t floats = 0;
    auto sizes = [&](std::vector<uint64_t>& out) {
        for (auto& f : out) {
            f = in.get<uint64_t>(&h);
            if (f > kMaxFloats || floats + f > kMaxFloats) corrupt(path, "tensors of more than 2^40 floats");
            floats += f;
        }
    };
    sizes(hd.tensor_floats);
    if (version >= 2) {
        const auto n_parts = in.get<uint64_t>(&h);
        if (n_parts > kMaxParts) corrupt(path, std::to_string(n_parts) + " pipeline stages");
        hd.parts.resize(n_parts);
        for (auto& part : hd.parts) {
            part.begin = in.get<int32_t>(&h);
            part.end = in.get<int32_t>(&h);
            if (part.begin < 0 || part.end < part.begin) corrupt(path, "a stage of blocks " + std::to_string(part.begin) +
                                                                           " to " + std::to_string(part.end));
            const auto len = in.get<uint64_t>(&h);
            if (len > kMaxIdentity) corrupt(path, "a stage's model identity of " + std::to_string(len) + " bytes");
            part.model_id.resize(len);
            in.read(part.model_id.data(), len);
            h += part.model_id;
            const auto n = in.get<uint64_t>(&h);
            if (n > kMaxTensors) corrupt(path, "a stage of " + std::to_string(n) + " tensors");
            part.tensor_floats.resize(n);
            sizes(part.tensor_floats);
        }
    }
    const auto hash = in.get<uint64_t>();
    if (hash != XXH3_64bits(h.data(), h.size())) corrupt(path, "its header hash does not match");
    hd.header_bytes = in.offset();
    // The trailer (payload bytes, payload hash, end magic) must close the
    // file exactly: a cut payload is found here, without reading it.
    char trailer[24];
    uint64_t size = 0;
    if (!in.tail(trailer, sizeof trailer, size) || std::memcmp(trailer + 16, kTrailerMagic, 8) != 0)
        throw Error("the KV cache file " + path + " is truncated (its end is not where its trailer says).");
    std::memcpy(&hd.payload_bytes, trailer, sizeof hd.payload_bytes);
    if (hd.payload_bytes > size || hd.header_bytes + hd.payload_bytes + sizeof trailer != size)
        throw Error("the KV cache file " + path + " is truncated (its end is not where its trailer says).");
    return hd;
}

}  // namespace

SnapshotCodec parse_snapshot_codec(const std::string& name) {
    if (name == "zstd") return SnapshotCodec::zstd;
    if (name == "lz4") return SnapshotCodec::lz4;
    throw Error("the KV cache compression must be zstd or lz4, not \"" + name + "\".");
}

const char* snapshot_codec_name(SnapshotCodec codec) { return codec == SnapshotCodec::lz4 ? "lz4" : "zstd"; }

void write_snapshot_file(const std::string& path, const std::string& tmp_path, const SessionSnapshot& snap,
                         const std::string& model_identity, SnapshotCodec codec) {
    if (static_cast<int64_t>(snap.tokens.size()) != snap.n_past())
        throw Error("a snapshot of " + std::to_string(snap.n_past()) + " positions holds " +
                    std::to_string(snap.tokens.size()) + " tokens.");
    std::string h(kMagic, sizeof kMagic);
    put(h, kVersion);
    put(h, static_cast<uint32_t>(codec));
    put(h, static_cast<uint64_t>(model_identity.size()));
    h += model_identity;
    put(h, snap.n_past());
    put(h, static_cast<uint64_t>(snap.tokens.size()));
    h.append(reinterpret_cast<const char*>(snap.tokens.data()), snap.tokens.size() * sizeof(int32_t));
    put(h, static_cast<uint64_t>(snap.state.tensors.size()));
    for (const auto& t : snap.state.tensors) put(h, static_cast<uint64_t>(t.size()));
    put(h, static_cast<uint64_t>(snap.state.route.size()));
    for (const RouteStatePart& part : snap.state.route) {
        put(h, static_cast<int32_t>(part.begin));
        put(h, static_cast<int32_t>(part.end));
        put(h, static_cast<uint64_t>(part.model_id.size()));
        h += part.model_id;
        put(h, static_cast<uint64_t>(part.tensors.size()));
        for (const auto& t : part.tensors) put(h, static_cast<uint64_t>(t.size()));
    }
    put(h, XXH3_64bits(h.data(), h.size()));

    const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot create the KV cache file " + tmp_path + ": " + errno_text());
    try {
        FdWriter out(fd, tmp_path);
        out.write(h.data(), h.size());
        // Frames run across tensor boundaries: the payload is the tensors'
        // floats end to end, cut every kFrameBytes.
        PayloadHash hash;
        uint64_t payload = 0;
        std::string raw;
        raw.reserve(kFrameBytes);
        auto flush = [&] {
            if (raw.empty()) return;
            const std::string packed = pack(codec, raw.data(), raw.size());
            std::string fh;
            put(fh, static_cast<uint32_t>(raw.size()));
            put(fh, static_cast<uint32_t>(packed.size()));
            out.write(fh.data(), fh.size());
            out.write(packed.data(), packed.size());
            hash.update(fh);
            hash.update(packed);
            payload += fh.size() + packed.size();
            raw.clear();
        };
        std::vector<const StateFloats*> all;
        for (const auto& t : snap.state.tensors) all.push_back(&t);
        for (const RouteStatePart& part : snap.state.route)
            for (const auto& t : part.tensors) all.push_back(&t);
        for (const StateFloats* tp : all) {
            const StateFloats& t = *tp;
            const char* p = reinterpret_cast<const char*>(t.data());
            size_t left = t.size() * sizeof(float);
            while (left > 0) {
                const size_t n = std::min<size_t>(left, kFrameBytes - raw.size());
                raw.append(p, n);
                p += n;
                left -= n;
                if (raw.size() == kFrameBytes) flush();
            }
        }
        flush();
        std::string tail;
        put(tail, payload);
        put(tail, hash.digest());
        tail.append(kTrailerMagic, sizeof kTrailerMagic);
        out.write(tail.data(), tail.size());
        if (::fsync(fd) != 0) throw Error("syncing the KV cache file " + tmp_path + " failed: " + errno_text());
    } catch (...) {
        ::close(fd);
        ::unlink(tmp_path.c_str());
        throw;
    }
    ::close(fd);
    if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
        const std::string why = errno_text();
        ::unlink(tmp_path.c_str());
        throw Error("cannot move the KV cache file into place as " + path + ": " + why);
    }
    fsync_dir(path);
}

SnapshotFileHeader read_snapshot_header(const std::string& path) {
    FdReader in(path);
    return read_header(in, path);
}

SessionSnapshot read_snapshot_file(const std::string& path, const std::string& model_identity) {
    FdReader in(path);
    SnapshotFileHeader hd = read_header(in, path);
    if (hd.model_identity != model_identity)
        corrupt(path, "it was written for another model file (identity " + hd.model_identity + ", this one " +
                          model_identity + ")");
    SessionSnapshot snap;
    snap.tokens = hd.tokens;
    snap.state.n_past = hd.n_past;
    snap.state.tokens = std::move(hd.tokens);
    snap.state.tensors.reserve(hd.tensor_floats.size());
    for (uint64_t f : hd.tensor_floats) snap.state.tensors.emplace_back(static_cast<size_t>(f));
    for (const auto& hp : hd.parts) {
        RouteStatePart part{hp.begin, hp.end, hp.model_id, {}};
        for (uint64_t f : hp.tensor_floats) part.tensors.emplace_back(static_cast<size_t>(f));
        snap.state.route.push_back(std::move(part));
    }
    // The payload fills this process's tensors, then each stage's, in order.
    std::vector<StateFloats*> targets;
    for (auto& t : snap.state.tensors) targets.push_back(&t);
    for (auto& part : snap.state.route)
        for (auto& t : part.tensors) targets.push_back(&t);

    PayloadHash hash;
    uint64_t payload = 0;
    {
        std::string raw, packed;
        size_t t = 0, at = 0;  // the tensor and float the next raw byte lands in
        auto place = [&](const std::string& bytes) {
            size_t off = 0;
            while (off < bytes.size()) {
                while (t < targets.size() && at == targets[t]->size()) ++t, at = 0;
                if (t == targets.size()) corrupt(path, "its frames hold more bytes than its tensors");
                const size_t n = std::min((targets[t]->size() - at) * sizeof(float), bytes.size() - off);
                if (n % sizeof(float) != 0) corrupt(path, "a frame ends inside a float");
                std::memcpy(targets[t]->data() + at, bytes.data() + off, n);
                at += n / sizeof(float);
                off += n;
            }
        };
        auto done = [&] {
            while (t < targets.size() && at == targets[t]->size()) ++t, at = 0;
            return t == targets.size();
        };
        while (!done()) {
            std::string fh;
            const auto raw_n = in.get<uint32_t>(&fh);
            const auto packed_n = in.get<uint32_t>(&fh);
            if (raw_n == 0 || raw_n > kFrameBytes || packed_n > ZSTD_compressBound(kFrameBytes) + 1024)
                corrupt(path, "a frame of " + std::to_string(raw_n) + " bytes packed in " + std::to_string(packed_n));
            packed.resize(packed_n);
            in.read(packed.data(), packed_n);
            hash.update(fh);
            hash.update(packed);
            payload += fh.size() + packed_n;
            raw.resize(raw_n);
            if (!unpack(hd.codec, packed, raw.data(), raw_n)) corrupt(path, "a frame does not decompress");
            place(raw);
        }
        const auto stored_payload = in.get<uint64_t>();
        const auto stored_hash = in.get<uint64_t>();
        char magic[8];
        in.read(magic, sizeof magic);
        if (stored_payload != payload || stored_hash != hash.digest() ||
            std::memcmp(magic, kTrailerMagic, sizeof magic) != 0)
            corrupt(path, "its payload hash does not match");
        if (!in.at_end()) corrupt(path, "bytes follow its end");
    }
    return snap;
}

}  // namespace ds4
