#include "experts/expert_pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace ds4 {

namespace {

constexpr char kMagic[8] = {'D', 'S', '4', 'X', 'P', 'A', 'C', 'K'};
constexpr char kTrailerMagic[8] = {'D', 'S', '4', 'X', 'T', 'A', 'I', 'L'};
// Bounds a reader holds a header to before it allocates anything.
constexpr uint64_t kMaxHeader = uint64_t(64) << 20;
constexpr uint32_t kMaxIdentity = 256, kMaxName = 4096, kMaxBlocks = 1 << 16;
constexpr int64_t kMaxExperts = int64_t(1) << 20;
constexpr uint64_t kMaxPart = uint64_t(1) << 40;
// magic, version, flags, header size, file size
constexpr uint64_t kFixedPrefix = 8 + 4 + 4 + 8 + 8;

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

class Put {
public:
    explicit Put(std::string& s) : s_(s) {}
    void raw(const void* p, size_t n) { s_.append(static_cast<const char*>(p), n); }
    void u8(uint8_t v) { raw(&v, 1); }
    void u32(uint32_t v) { raw(&v, 4); }
    void u64(uint64_t v) { raw(&v, 8); }
    void str(const std::string& v) {
        u32(uint32_t(v.size()));
        raw(v.data(), v.size());
    }

private:
    std::string& s_;
};

// Reads fields off a buffer; any read past its end marks it bad.
class Get {
public:
    Get(const uint8_t* p, size_t n) : p_(p), n_(n) {}
    bool ok() const { return ok_; }
    size_t at() const { return at_; }
    bool raw(void* dst, size_t n) {
        if (!ok_ || n > n_ - at_) return ok_ = false;
        std::memcpy(dst, p_ + at_, n);
        at_ += n;
        return true;
    }
    uint8_t u8() { uint8_t v = 0; raw(&v, 1); return v; }
    uint32_t u32() { uint32_t v = 0; raw(&v, 4); return v; }
    uint64_t u64() { uint64_t v = 0; raw(&v, 8); return v; }
    std::string str(uint32_t max) {
        const uint32_t n = u32();
        if (!ok_ || n > max) {
            ok_ = false;
            return {};
        }
        std::string s(n, '\0');
        raw(s.data(), n);
        return s;
    }

private:
    const uint8_t* p_;
    size_t n_, at_ = 0;
    bool ok_ = true;
};

// Everything in the header but its checksum and padding.
std::string header_payload(const PackLayout& l) {
    std::string s;
    Put p(s);
    p.raw(kMagic, 8);
    p.u32(kPackVersion);
    p.u32(0);  // flags
    p.u64(l.header_bytes);
    p.u64(l.file_bytes);
    p.str(l.identity);
    p.u32(uint32_t(l.blocks.size()));
    for (const PackBlock& b : l.blocks) {
        p.u32(uint32_t(b.layer));
        p.u64(uint64_t(b.n_expert));
        p.u64(b.record_bytes);
        p.u64(b.first_record);
        p.u32(uint32_t(b.parts.size()));
        for (const PackPartLayout& part : b.parts) {
            p.u8(uint8_t(part.kind));
            p.u32(uint32_t(part.type));
            p.u64(part.offset);
            p.u64(part.bytes);
            p.str(part.tensor);
        }
    }
    return s;
}

bool same_layout(const PackLayout& a, const PackLayout& b) {
    if (a.header_bytes != b.header_bytes || a.file_bytes != b.file_bytes ||
        a.blocks.size() != b.blocks.size())
        return false;
    for (size_t i = 0; i < a.blocks.size(); ++i) {
        const PackBlock &x = a.blocks[i], &y = b.blocks[i];
        if (x.record_bytes != y.record_bytes || x.first_record != y.first_record || x.parts.size() != y.parts.size())
            return false;
        for (size_t k = 0; k < x.parts.size(); ++k)
            if (x.parts[k].offset != y.parts[k].offset) return false;
    }
    return true;
}

// Exactly n bytes at offset, or false (a short file, an I/O error).
bool read_exact(int fd, void* dst, uint64_t n, uint64_t offset) {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
        const ssize_t got = ::pread(fd, p, n, off_t(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        p += got;
        n -= uint64_t(got);
        offset += uint64_t(got);
    }
    return true;
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

const char* pack_part_name(PackPart p) {
    switch (p) {
        case PackPart::gate: return "gate";
        case PackPart::up: return "up";
        case PackPart::down: return "down";
        case PackPart::gate_scale: return "gate scale";
        case PackPart::up_scale: return "up scale";
        case PackPart::down_scale: return "down scale";
    }
    return "?";
}

const PackPartLayout* PackBlock::part(PackPart k) const {
    for (const PackPartLayout& p : parts)
        if (p.kind == k) return &p;
    return nullptr;
}

uint64_t PackLayout::n_records() const {
    uint64_t n = 0;
    for (const PackBlock& b : blocks) n += uint64_t(b.n_expert);
    return n;
}

uint64_t pack_trailer_bytes(uint64_t n_records) { return 8 + 8 + 8 * n_records + 8 + 8; }

void pack_layout(PackLayout& l) {
    if (l.identity.size() > kMaxIdentity) throw Error("an expert pack's model identity is too long.");
    if (l.blocks.empty() || l.blocks.size() > kMaxBlocks)
        throw Error("an expert pack holds 1 to " + std::to_string(kMaxBlocks) + " blocks, not " +
                    std::to_string(l.blocks.size()) + ".");
    size_t index = 0;
    for (size_t i = 0; i < l.blocks.size(); ++i) {
        PackBlock& b = l.blocks[i];
        const std::string where = "block " + std::to_string(b.layer);
        if (b.layer < 0 || (i > 0 && b.layer <= l.blocks[i - 1].layer))
            throw Error("an expert pack's blocks go by ascending layer (" + where + ").");
        if (b.n_expert < 1 || b.n_expert > kMaxExperts)
            throw Error(where + " has " + std::to_string(b.n_expert) + " experts.");
        if (b.parts.size() < 3 || b.parts.size() > 6) throw Error(where + " has " + std::to_string(b.parts.size()) + " parts.");
        uint64_t end = 0;
        for (size_t k = 0; k < b.parts.size(); ++k) {
            PackPartLayout& p = b.parts[k];
            // gate, up, down first, then scales in order, each at most once.
            const bool in_order = k < 3 ? p.kind == PackPart(k) : uint8_t(p.kind) >= 3 && uint8_t(p.kind) <= 5 &&
                                                                       (k == 3 || p.kind > b.parts[k - 1].kind);
            if (!in_order) throw Error(where + "'s parts are not gate, up, down and then scales.");
            if (p.bytes == 0 || p.bytes > kMaxPart || p.tensor.size() > kMaxName)
                throw Error(where + "'s " + pack_part_name(p.kind) + " part has " + std::to_string(p.bytes) + " bytes.");
            p.offset = align_up(end, kPackPartAlign);
            end = p.offset + p.bytes;
        }
        b.record_bytes = align_up(end, kPackAlign);
        b.first_index = index;
        index += size_t(b.n_expert);
    }
    const uint64_t payload = header_payload(l).size();
    l.header_bytes = align_up(payload + 8, kPackAlign);
    uint64_t at = l.header_bytes;
    for (PackBlock& b : l.blocks) {
        b.first_record = at;
        at += uint64_t(b.n_expert) * b.record_bytes;
    }
    l.records_end = at;
    l.file_bytes = at + pack_trailer_bytes(l.n_records());
}

std::string encode_pack_header(const PackLayout& l, uint64_t& checksum) {
    std::string s = header_payload(l);
    checksum = XXH3_64bits(s.data(), s.size());
    Put(s).u64(checksum);
    s.resize(l.header_bytes, '\0');
    return s;
}

std::string encode_pack_trailer(const std::vector<uint64_t>& sums, uint64_t header_checksum) {
    std::string s;
    Put p(s);
    p.raw(kTrailerMagic, 8);
    p.u64(sums.size());
    for (uint64_t v : sums) p.u64(v);
    p.u64(header_checksum);
    p.u64(XXH3_64bits(s.data(), s.size()));
    return s;
}

uint64_t pack_record_checksum(const uint8_t* bytes, uint64_t n) { return XXH3_64bits(bytes, n); }

ExpertPack ExpertPack::open(const std::string& path) {
    const std::string who = "the expert pack " + path;
    auto damaged = [&](const std::string& why) { return Error(who + " is damaged (" + why + "); pack the model again."); };
    Fd f;
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) throw Error("cannot open " + who + ": " + std::strerror(errno) + ".");
    struct stat st {};
    if (fstat(f.fd, &st) != 0) throw Error("cannot stat " + who + ": " + std::strerror(errno) + ".");
    if (!S_ISREG(st.st_mode)) throw Error(who + " is not a regular file.");
    const uint64_t size = uint64_t(st.st_size);

    uint8_t prefix[kFixedPrefix] = {};
    if (size < kFixedPrefix || !read_exact(f.fd, prefix, kFixedPrefix, 0) || std::memcmp(prefix, kMagic, 8) != 0)
        throw Error(who + " is not an expert pack (ds4-gguf pack writes them).");
    Get g(prefix, kFixedPrefix);
    uint8_t magic[8];
    g.raw(magic, 8);
    const uint32_t version = g.u32();
    if (version != kPackVersion)
        throw Error(who + " is of format version " + std::to_string(version) + "; this ds4 reads version " +
                    std::to_string(kPackVersion) + " (pack the model again).");
    g.u32();
    const uint64_t header_bytes = g.u64();
    if (header_bytes < kFixedPrefix + 8 || header_bytes > kMaxHeader || header_bytes % kPackAlign != 0)
        throw damaged("a header size of " + std::to_string(header_bytes) + " bytes");
    if (size < header_bytes)
        throw Error(who + " is cut short: " + std::to_string(size) + " bytes, less than its header's " +
                    std::to_string(header_bytes) + ".");
    std::vector<uint8_t> h(header_bytes);
    if (!read_exact(f.fd, h.data(), header_bytes, 0)) throw Error("cannot read " + who + ": " + std::strerror(errno) + ".");

    // The fields, then the checksum over them: damage anywhere in the
    // header (a length field included) shows as a mismatch.
    Get r(h.data(), h.size());
    ExpertPack pack;
    pack.path_ = path;
    PackLayout& l = pack.layout_;
    r.raw(magic, 8);
    r.u32();
    const uint32_t flags = r.u32();
    l.header_bytes = r.u64();
    l.file_bytes = r.u64();
    l.identity = r.str(kMaxIdentity);
    const uint32_t n_blocks = r.u32();
    if (!r.ok() || n_blocks == 0 || n_blocks > kMaxBlocks) throw damaged("its header does not parse");
    for (uint32_t i = 0; i < n_blocks && r.ok(); ++i) {
        PackBlock b;
        b.layer = int(r.u32());
        b.n_expert = int64_t(r.u64());
        b.record_bytes = r.u64();
        b.first_record = r.u64();
        const uint32_t n_parts = r.u32();
        if (!r.ok() || n_parts < 3 || n_parts > 6) throw damaged("its header does not parse");
        for (uint32_t k = 0; k < n_parts && r.ok(); ++k) {
            PackPartLayout p;
            const uint8_t kind = r.u8();
            const uint32_t type = r.u32();
            p.offset = r.u64();
            p.bytes = r.u64();
            p.tensor = r.str(kMaxName);
            if (kind > 5 || !ggml_type_traits(type)) throw damaged("its header does not parse");
            p.kind = PackPart(kind);
            p.type = GgmlType(type);
            b.parts.push_back(std::move(p));
        }
        l.blocks.push_back(std::move(b));
    }
    const size_t payload = r.at();
    const uint64_t stored_sum = r.u64();
    if (!r.ok()) throw damaged("its header does not parse");
    const uint64_t header_sum = XXH3_64bits(h.data(), payload);
    if (stored_sum != header_sum) throw damaged("its header does not match its checksum");
    for (size_t i = r.at(); i < h.size(); ++i)
        if (h[i] != 0) throw damaged("bytes after its header");
    if (flags != 0) throw damaged("unknown flags " + std::to_string(flags));
    // The layout its parts make, and no other.
    PackLayout canonical = l;
    try {
        pack_layout(canonical);
    } catch (const Error& e) {
        throw damaged(std::string("its layout: ") + e.what());
    }
    if (!same_layout(l, canonical)) throw damaged("its record layout is not the one its parts make");
    l = canonical;
    if (size < l.file_bytes)
        throw Error(who + " is cut short: " + std::to_string(size) + " bytes of the " + std::to_string(l.file_bytes) +
                    " its header names.");
    if (size > l.file_bytes)
        throw Error(who + " is longer than its header says (" + std::to_string(size) + " bytes, not " +
                    std::to_string(l.file_bytes) + ").");

    const uint64_t n = l.n_records();
    std::vector<uint8_t> t(pack_trailer_bytes(n));
    if (!read_exact(f.fd, t.data(), t.size(), l.records_end)) throw Error("cannot read " + who + "'s trailer.");
    Get tr(t.data(), t.size());
    tr.raw(magic, 8);
    const uint64_t count = tr.u64();
    if (std::memcmp(magic, kTrailerMagic, 8) != 0 || count != n) throw damaged("its trailer does not count its records");
    pack.sums_.resize(n);
    for (uint64_t& v : pack.sums_) v = tr.u64();
    const uint64_t header_again = tr.u64();
    const size_t before = tr.at();
    const uint64_t trailer_sum = tr.u64();
    if (!tr.ok() || trailer_sum != XXH3_64bits(t.data(), before)) throw damaged("its trailer does not match its checksum");
    if (header_again != header_sum) throw damaged("its trailer belongs to another header");
    return pack;
}

const PackBlock* ExpertPack::block(int layer) const {
    for (const PackBlock& b : layout_.blocks)
        if (b.layer == layer) return &b;
    return nullptr;
}

void ExpertPack::check_matches(const std::string& identity, const std::vector<RoutedExperts>& blocks) const {
    const std::string who = "the expert pack " + path_;
    if (identity != layout_.identity)
        throw Error(who + " was made from another model file (identity " + layout_.identity + "; this model is " +
                    identity + ").");
    for (const RoutedExperts& m : blocks) {
        const PackBlock* b = block(m.layer);
        if (!b)
            throw Error(who + " has no block " + std::to_string(m.layer) + " (it holds blocks " +
                        std::to_string(layout_.blocks.front().layer) + " to " + std::to_string(layout_.blocks.back().layer) +
                        ").");
        const std::string where = who + " does not match block " + std::to_string(m.layer) + " of the model";
        if (b->n_expert != m.n_expert())
            throw Error(where + " (" + std::to_string(b->n_expert) + " experts, the model " + std::to_string(m.n_expert()) + ").");
        const WeightRef* w[6] = {&m.gate, &m.up, &m.down, &m.gate_scale, &m.up_scale, &m.down_scale};
        for (int k = 0; k < 6; ++k) {
            const PackPartLayout* p = b->part(PackPart(k));
            // Scales shared by all experts (one value) stay in the GGUF.
            const bool wanted = k < 3 || (!w[k]->name.empty() && w[k]->ne[0] > 1);
            if (!wanted) {
                if (p) throw Error(where + " (a " + std::string(pack_part_name(PackPart(k))) + " part the model has not).");
                continue;
            }
            const uint64_t bytes = k < 3 ? w[k]->matrix_bytes : sizeof(float);
            if (!p || p->tensor != w[k]->name || p->type != w[k]->type || p->bytes != bytes)
                throw Error(where + ": '" + w[k]->name + "' is " + std::string(ggml_type_name(w[k]->type)) + " of " +
                            std::to_string(bytes) + " bytes per expert in the model, " +
                            (p ? "'" + p->tensor + "' " + std::string(ggml_type_name(p->type)) + " of " +
                                     std::to_string(p->bytes) + " in the pack."
                               : "absent from the pack."));
        }
    }
}

bool ExpertPack::record_intact(const PackBlock& b, int64_t expert, const uint8_t* bytes) const {
    return pack_record_checksum(bytes, b.record_bytes) == sums_[b.first_index + size_t(expert)];
}

}  // namespace ds4
