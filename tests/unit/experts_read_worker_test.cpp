// The expert cache's read worker: a job runs on another thread while the
// caller goes on, wait() returns only once it has finished and hands back
// what it threw, a second job before the first was waited for is refused,
// and destruction waits for a job still running.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/error.h"
#include "experts/read_worker.h"

namespace ds4 {
namespace {

TEST(ReadWorker, RunsTheJobElsewhereAndWaitReturnsAfterIt) {
    ReadWorker w;
    std::atomic<bool> release{false}, finished{false};
    std::thread::id ran_on;
    w.start([&] {
        ran_on = std::this_thread::get_id();
        while (!release) std::this_thread::yield();
        finished = true;
    });
    EXPECT_TRUE(w.busy());
    // The caller is not held up: the job waits for it.
    release = true;
    w.wait();
    EXPECT_TRUE(finished);
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_FALSE(w.busy());
    w.wait();  // nothing started: returns at once
}

TEST(ReadWorker, WaitRethrowsTheJobsErrorOnce) {
    ReadWorker w;
    w.start([] { throw Error("reading expert 3 failed."); });
    try {
        w.wait();
        ADD_FAILURE() << "wait() did not throw the job's error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "reading expert 3 failed.");
    }
    w.wait();  // handed back once
    int runs = 0;
    w.start([&] { ++runs; });  // the worker still takes jobs
    w.wait();
    EXPECT_EQ(runs, 1);
}

TEST(ReadWorker, ASecondJobBeforeTheWaitIsRefused) {
    ReadWorker w;
    std::atomic<bool> release{false};
    w.start([&] { while (!release) std::this_thread::yield(); });
    EXPECT_THROW(w.start([] {}), std::logic_error);
    release = true;
    w.wait();
}

TEST(ReadWorker, DestructionWaitsForARunningJob) {
    std::atomic<bool> finished{false};
    {
        ReadWorker w;
        w.start([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            finished = true;
        });
    }
    EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace ds4
