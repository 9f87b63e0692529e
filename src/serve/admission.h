// Admission of inference work in `diffnet serve`: a bounded FIFO queue in front of N inference slots.
// A request is admitted when the queue has room and the pixels of all admitted requests stay within a
// budget (cost is pixels, not bytes); it then waits its turn (first come, first served) until a slot is
// free, or gives up at its deadline. Pure C++ (no HTTP), so it is tested on its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace diffnet::serve {

class Admission {
 public:
  // slots >= 1 inference slots; max_waiting requests may wait for one (0: none wait); max_pixels bounds
  // the pixels of running + waiting requests (<= 0: no bound).
  Admission(int slots, int max_waiting, int64_t max_pixels);

  enum class Outcome { kRun, kQueueFull, kTooManyPixels, kTimedOut, kStopped };
  struct Ticket {
    Outcome outcome = Outcome::kStopped;
    int slot = -1;        // with kRun: the slot to use; give it back with release()
    int64_t pixels = 0;
    int waiting_ahead = 0;  // when refused: requests that were waiting
  };
  // Blocks until the request may run or is refused. A request of more pixels than the whole budget is
  // still admitted when nothing else is admitted (so any image under the decoder's limit can run).
  Ticket acquire(int64_t pixels, std::chrono::steady_clock::time_point deadline);
  void release(const Ticket& t);
  // Wakes every waiter with kStopped (server shutdown).
  void stop();

  struct Stats {
    int running = 0, waiting = 0;
    int64_t pixels = 0;
  };
  Stats stats() const;

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<bool> busy_;
  std::deque<uint64_t> queue_;  // tickets waiting, in arrival order
  uint64_t next_ticket_ = 0;
  int max_waiting_;
  int64_t max_pixels_, pixels_ = 0;
  int running_ = 0;
  bool stopped_ = false;
};

const char* outcome_name(Admission::Outcome o);

}  // namespace diffnet::serve
