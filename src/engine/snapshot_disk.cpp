#include "engine/snapshot_disk.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "common/log.h"

namespace fs = std::filesystem;

namespace ds4 {

namespace {

constexpr const char* kSuffix = ".ds4kv";
constexpr const char* kTmpPrefix = ".tmp-";

uint64_t tokens_hash(std::span<const int32_t> tokens) { return XXH3_64bits(tokens.data(), tokens.size_bytes()); }

// <hash of the tokens>-<token count>.ds4kv: a prompt's prefix names its file.
std::string file_name(uint64_t hash, uint64_t n_tokens) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%016" PRIx64 "-%" PRIu64, hash, n_tokens);
    return buf + std::string(kSuffix);
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A temporary file's writer, from ".tmp-<pid>-<n>.ds4kv": gone when the
// process no longer runs (then the file is a killed write's leftover).
bool writer_gone(const std::string& name) {
    const long pid = std::strtol(name.c_str() + std::char_traits<char>::length(kTmpPrefix), nullptr, 10);
    if (pid <= 0) return true;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

SnapshotDisk::SnapshotDisk(SnapshotDiskOptions options) : opts_(std::move(options)) {
    std::error_code ec;
    fs::create_directories(opts_.dir, ec);
    if (ec || !fs::is_directory(opts_.dir))
        throw Error("cannot use " + opts_.dir + " as the KV cache directory: " +
                    (ec ? ec.message() : std::string("it is not a directory")) + ".");
    if (::access(opts_.dir.c_str(), W_OK) != 0)
        throw Error("cannot write to the KV cache directory " + opts_.dir + ".");
    index();
    writer_ = std::thread([this] { writer_loop(); });
}

SnapshotDisk::~SnapshotDisk() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    writer_.join();
}

std::string SnapshotDisk::path_of(const std::string& name) const { return (fs::path(opts_.dir) / name).string(); }

void SnapshotDisk::index() {
    struct Found {
        std::string name;
        Entry entry;
        fs::file_time_type mtime;
    };
    std::vector<Found> found;
    std::error_code ec;
    for (const auto& de : fs::directory_iterator(opts_.dir, ec)) {
        const std::string name = de.path().filename().string();
        if (!de.is_regular_file()) continue;
        if (name.rfind(kTmpPrefix, 0) == 0) {
            if (ends_with(name, kSuffix) && writer_gone(name)) ::unlink(de.path().c_str());
            continue;
        }
        if (!ends_with(name, kSuffix)) continue;
        try {
            const SnapshotFileHeader h = read_snapshot_header(de.path().string());
            if (h.model_identity != opts_.model_identity) {
                log_warning("KV cache: ignoring " + de.path().string() + ": it was written for another model file.");
                continue;
            }
            const uint64_t hash = tokens_hash(h.tokens);
            if (file_name(hash, h.tokens.size()) != name) {
                log_warning("KV cache: ignoring " + de.path().string() + ": its name does not match its tokens.");
                continue;
            }
            found.push_back({name, Entry{h.tokens.size(), hash, static_cast<uint64_t>(de.file_size()), 0},
                             de.last_write_time()});
        } catch (const Error& e) {
            log_warning("KV cache: ignoring " + de.path().string() + ": " + e.what());
        }
    }
    if (ec) throw Error("cannot list the KV cache directory " + opts_.dir + ": " + ec.message() + ".");
    // Least recently used first, so the clock gives the newest the largest value.
    std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& f : found) {
        f.entry.last_used = ++clock_;
        stats_.bytes += f.entry.file_bytes;
        entries_.emplace(f.name, f.entry);
    }
    stats_.files = entries_.size();
    evict_to_fit(0);
}

void SnapshotDisk::store(const SessionSnapshot& snap) {
    if (snap.n_past() == 0 || snap.bytes() > opts_.max_bytes) return;
    const std::string name = file_name(tokens_hash(snap.tokens), snap.tokens.size());
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = entries_.find(name); it != entries_.end()) {
            it->second.last_used = ++clock_;
            return;
        }
        for (const auto& q : queue_)
            if (q.tokens == snap.tokens) return;
        queue_.push_back(snap);
    }
    cv_.notify_all();
}

void SnapshotDisk::writer_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything is written
        SessionSnapshot snap = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
        // Room first, with the raw size as the bound (compression only shrinks it).
        evict_to_fit(snap.bytes());
        lock.unlock();
        write_one(snap);
        lock.lock();
        writing_ = false;
        cv_.notify_all();
    }
}

void SnapshotDisk::write_one(const SessionSnapshot& snap) {
    const uint64_t hash = tokens_hash(snap.tokens);
    const std::string name = file_name(hash, snap.tokens.size());
    static std::atomic<uint64_t> serial{0};
    const std::string tmp =
        path_of(kTmpPrefix + std::to_string(::getpid()) + "-" + std::to_string(++serial) + kSuffix);
    try {
        write_snapshot_file(path_of(name), tmp, snap, opts_.model_identity, opts_.codec);
        struct stat st {};
        const uint64_t size = ::stat(path_of(name).c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = entries_.find(name); it != entries_.end()) stats_.bytes -= it->second.file_bytes;
        entries_[name] = Entry{snap.tokens.size(), hash, size, ++clock_};
        stats_.bytes += size;
        stats_.bytes_written += size;
        ++stats_.stores;
        stats_.files = entries_.size();
    } catch (const Error& e) {
        log_warning(std::string("KV cache: ") + e.what());
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.store_failures;
    }
}

void SnapshotDisk::evict_to_fit(uint64_t incoming) {
    while (!entries_.empty() && stats_.bytes + incoming > opts_.max_bytes) {
        auto oldest = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
            return a.second.last_used < b.second.last_used;
        });
        drop(oldest->first, true);
        ++stats_.evictions;
    }
}

void SnapshotDisk::drop(const std::string& name, bool remove_file) {
    auto it = entries_.find(name);
    if (it == entries_.end()) return;
    const std::string path = path_of(name);  // before erase: name may be the entry's own key
    stats_.bytes -= it->second.file_bytes;
    entries_.erase(it);
    stats_.files = entries_.size();
    if (remove_file) ::unlink(path.c_str());
}

std::optional<SessionSnapshot> SnapshotDisk::load(std::span<const int32_t> prompt, int64_t at_least) {
    std::unique_lock<std::mutex> lock(mu_);
    // Candidates longest first; the prompt's prefix hash names the file.
    std::vector<std::pair<uint64_t, std::string>> cands;
    for (const auto& [name, e] : entries_)
        if (static_cast<int64_t>(e.n_tokens) > at_least && e.n_tokens < prompt.size())
            cands.emplace_back(e.n_tokens, name);
    std::sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [n, name] : cands) {
        auto it = entries_.find(name);
        if (it == entries_.end() || tokens_hash(prompt.first(n)) != it->second.tokens_hash) continue;
        lock.unlock();
        std::optional<SessionSnapshot> snap;
        std::string failure;
        try {
            snap = read_snapshot_file(path_of(name), opts_.model_identity);
            if (!std::equal(snap->tokens.begin(), snap->tokens.end(), prompt.begin()) || snap->tokens.size() != n) {
                failure = "KV cache: " + path_of(name) + " holds other tokens than its name says; dropped.";
                snap.reset();
            }
        } catch (const Error& e) {
            failure = std::string("KV cache: ") + e.what() + " Dropped.";
        }
        lock.lock();
        if (snap) {
            if (auto again = entries_.find(name); again != entries_.end()) {
                again->second.last_used = ++clock_;
                stats_.bytes_read += again->second.file_bytes;
            }
            ::utimensat(AT_FDCWD, path_of(name).c_str(), nullptr, 0);  // the order survives a restart
            ++stats_.hits;
            return snap;
        }
        log_warning(failure);
        ++stats_.load_failures;
        drop(name, true);
    }
    ++stats_.misses;
    return std::nullopt;
}

void SnapshotDisk::flush() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

SnapshotDiskStats SnapshotDisk::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

}  // namespace ds4
