#include <liburing.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "experts/file_reads.h"
#include "experts/read_pieces.h"

namespace ds4 {

namespace {

// O_DIRECT wants the file offset, the length and the buffer aligned to the
// device's logical block; 4 KiB covers every common device.
constexpr uint64_t kDirectAlign = 4096;

uint64_t align_down(uint64_t n) { return n / kDirectAlign * kDirectAlign; }
uint64_t align_up(uint64_t n) { return (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }

class UringReads final : public FileReads {
public:
    UringReads(int fd, bool direct, unsigned depth, io_uring ring)
        : fd_(fd), direct_(direct), depth_(depth), ring_(ring), flights_(depth) {
        if (direct_) {
            // A piece plus the alignment slack on both of its ends.
            bounce_bytes_ = kReadPiece + 2 * kDirectAlign;
            bounce_ = static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, bounce_bytes_ * depth_));
            if (!bounce_) direct_ = false;  // read unaligned into the destinations instead
        }
    }
    ~UringReads() override {
        io_uring_queue_exit(&ring_);
        std::free(bounce_);
    }

    std::string describe() const override {
        return std::string("io_uring") + (direct_ ? ", O_DIRECT" : ", page cache") + ", " + std::to_string(depth_) +
               " reads in flight";
    }

    bool run(const std::vector<ReadSpan>& spans, ReadFailure& failure) override {
        const std::vector<ReadPiece> pieces = split_into_pieces(spans);
        std::deque<unsigned> ready;  // flights with a piece (new or the rest of a short read) to submit
        std::vector<unsigned> free_flights;
        for (unsigned f = depth_; f-- > 0;) free_flights.push_back(f);
        size_t next = 0;
        unsigned in_flight = 0;
        bool failed = false;
        for (;;) {
            while (!failed && !free_flights.empty() && next < pieces.size()) {
                const unsigned f = free_flights.back();
                free_flights.pop_back();
                flights_[f].piece = pieces[next++];
                ready.push_back(f);
            }
            for (; !ready.empty(); ready.pop_front()) {
                if (failed) {
                    free_flights.push_back(ready.front());
                    continue;
                }
                prepare(ready.front(), spans);
                ++in_flight;
            }
            if (in_flight == 0) break;
            const int rc = io_uring_submit_and_wait(&ring_, 1);
            if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
                // The ring itself failed: nothing more completes.
                failure = ReadFailure{flights_[0].piece.span, std::string("io_uring: ") + std::strerror(-rc)};
                return false;
            }
            io_uring_cqe* cqe = nullptr;
            while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
                const unsigned f = static_cast<unsigned>(io_uring_cqe_get_data64(cqe));
                const int res = cqe->res;
                io_uring_cqe_seen(&ring_, cqe);
                --in_flight;
                if (res == -EINTR || res == -EAGAIN) {
                    ready.push_back(f);
                    continue;
                }
                std::string why;
                if (!complete(f, res, spans, why)) {
                    ready.push_back(f);  // the rest of a short read
                    continue;
                }
                if (!why.empty() && !failed) {
                    failed = true;
                    failure = ReadFailure{flights_[f].piece.span, why};
                }
                free_flights.push_back(f);
            }
        }
        return !failed;
    }

private:
    struct Flight {
        ReadPiece piece;
        uint64_t at = 0;  // file offset the submitted read starts at
    };

    void prepare(unsigned f, const std::vector<ReadSpan>& spans) {
        Flight& fl = flights_[f];
        const ReadPiece& p = fl.piece;
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // never null: at most depth_ reads are out
        if (direct_) {
            fl.at = align_down(p.start);
            io_uring_prep_read(sqe, fd_, bounce_ + uint64_t(f) * bounce_bytes_, unsigned(align_up(p.end) - fl.at), fl.at);
        } else {
            fl.at = p.start;
            const ReadSpan& s = spans[p.span];
            io_uring_prep_read(sqe, fd_, s.dst + (p.start - s.offset), unsigned(p.end - p.start), p.start);
        }
        io_uring_sqe_set_data64(sqe, f);
    }

    // Takes a completion of flight f. Returns false when part of the piece
    // is still to read (a short read before the end of the file); `why` is
    // set when the piece failed.
    bool complete(unsigned f, int res, const std::vector<ReadSpan>& spans, std::string& why) {
        Flight& fl = flights_[f];
        ReadPiece& p = fl.piece;
        const ReadSpan& s = spans[p.span];
        if (res < 0) {
            why = std::strerror(-res);
            return true;
        }
        const uint64_t have_end = fl.at + uint64_t(res);  // file bytes [fl.at, have_end) arrived
        const uint64_t before = p.start;
        if (direct_ && have_end > p.start) {
            const uint64_t upto = std::min(have_end, p.end);
            std::memcpy(s.dst + (p.start - s.offset), bounce_ + uint64_t(f) * bounce_bytes_ + (p.start - fl.at), upto - p.start);
            p.start = upto;
        } else if (!direct_) {
            p.start = have_end;
        }
        if (p.start >= p.end) return true;
        // No progress, or a direct read that stopped inside a block: the
        // file ends there.
        if (res == 0 || p.start == before || (direct_ && uint64_t(res) % kDirectAlign != 0)) {
            why = ended_early(s, have_end);
            return true;
        }
        return false;  // a short read mid-file: read the rest
    }

    int fd_;
    bool direct_;
    unsigned depth_;
    io_uring ring_;
    std::vector<Flight> flights_;
    uint8_t* bounce_ = nullptr;  // depth_ buffers of bounce_bytes_, for O_DIRECT
    uint64_t bounce_bytes_ = 0;
};

}  // namespace

std::unique_ptr<FileReads> make_uring_reads(int fd, bool direct, unsigned depth) {
    io_uring ring{};
    if (io_uring_queue_init(depth, &ring, 0) < 0) return nullptr;
    return std::make_unique<UringReads>(fd, direct, depth, ring);
}

}  // namespace ds4
