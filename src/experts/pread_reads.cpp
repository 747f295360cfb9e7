#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "experts/file_reads.h"
#include "experts/read_pieces.h"

namespace ds4 {

namespace {

// A fixed pool: a decode token asks for a batch per MoE block, too often
// to start threads for each.
class PreadReads final : public FileReads {
public:
    PreadReads(int fd, unsigned threads) : fd_(fd) {
        for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
    }
    ~PreadReads() override {
        {
            std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto& t : workers_) t.join();
    }

    std::string describe() const override {
        return "pread, " + std::to_string(workers_.size()) + " threads, page cache";
    }

    bool run(const std::vector<ReadSpan>& spans, ReadFailure& failure) override {
        std::unique_lock<std::mutex> lock(m_);
        pieces_ = split_into_pieces(spans);
        spans_ = &spans;
        next_ = 0;
        failed_ = false;
        busy_ = unsigned(workers_.size());
        ++generation_;
        wake_.notify_all();
        done_.wait(lock, [this] { return busy_ == 0; });
        spans_ = nullptr;
        if (failed_) failure = failure_;
        return !failed_;
    }

private:
    void work() {
        uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(m_);
                wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
            }
            for (size_t i; !failed_.load() && (i = next_.fetch_add(1)) < pieces_.size();) read_piece(pieces_[i]);
            std::lock_guard<std::mutex> lock(m_);
            if (--busy_ == 0) done_.notify_one();
        }
    }

    void read_piece(const ReadPiece& p) {
        const ReadSpan& s = (*spans_)[p.span];
        for (uint64_t at = p.start; at < p.end;) {
            const ssize_t n = ::pread(fd_, s.dst + (at - s.offset), p.end - at, off_t(at));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                fail(p.span, n < 0 ? std::strerror(errno) : ended_early(s, at));
                return;
            }
            at += uint64_t(n);
        }
    }

    void fail(size_t span, const std::string& why) {
        std::lock_guard<std::mutex> lock(m_);
        if (!failed_.exchange(true)) failure_ = ReadFailure{span, why};
    }

    int fd_;
    std::vector<std::thread> workers_;
    std::mutex m_;
    std::condition_variable wake_, done_;
    uint64_t generation_ = 0;
    unsigned busy_ = 0;
    bool stop_ = false;
    std::vector<ReadPiece> pieces_;
    const std::vector<ReadSpan>* spans_ = nullptr;
    std::atomic<size_t> next_{0};
    std::atomic<bool> failed_{false};
    ReadFailure failure_;
};

}  // namespace

std::unique_ptr<FileReads> make_pread_reads(int fd, unsigned threads) {
    return std::make_unique<PreadReads>(fd, threads == 0 ? 1 : threads);
}

}  // namespace ds4
