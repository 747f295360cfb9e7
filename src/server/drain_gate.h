// The requests a stopping server still owes an answer. httplib's stop()
// ends every chunked response it is writing (a stream would lose its end),
// so at SIGTERM the listener keeps running, refusing new requests, until
// every request routed before is answered in full; then it stops.
// A request is counted from routing to its response's last byte.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace ds4 {

class DrainGate {
public:
    // A request is being routed: true (and counted) while the gate is open,
    // false once it is closed (refuse the request).
    bool enter();
    // A counted request's response is written (or its client is gone).
    void leave();
    // From now on enter() refuses.
    void close();
    bool closed() const;
    // Counted requests not answered yet.
    int in_flight() const;
    // Waits until none is left, or until `deadline`; true when none is left.
    bool wait_idle_until(std::chrono::steady_clock::time_point deadline);

private:
    mutable std::mutex mu_;
    std::condition_variable idle_;
    int in_flight_ = 0;
    bool closed_ = false;
};

}  // namespace ds4
