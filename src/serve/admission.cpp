// Bounded FIFO admission of inference work (src/serve/admission.h).
#include "serve/admission.h"

#include <algorithm>

namespace diffnet::serve {

Admission::Admission(int slots, int max_waiting, int64_t max_pixels)
    : busy_(size_t(std::max(1, slots)), false), max_waiting_(std::max(0, max_waiting)), max_pixels_(max_pixels) {}

Admission::Ticket Admission::acquire(int64_t pixels, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(m_);
  Ticket t;
  t.pixels = pixels;
  t.waiting_ahead = int(queue_.size());
  if (stopped_) return t;
  const bool slot_free = std::find(busy_.begin(), busy_.end(), false) != busy_.end();
  if (!(slot_free && queue_.empty()) && int(queue_.size()) >= max_waiting_) {
    t.outcome = Outcome::kQueueFull;
    return t;
  }
  if (max_pixels_ > 0 && pixels_ > 0 && pixels_ + pixels > max_pixels_) {
    t.outcome = Outcome::kTooManyPixels;
    return t;
  }
  const uint64_t me = next_ticket_++;
  queue_.push_back(me);
  pixels_ += pixels;
  auto my_turn = [&] {
    return stopped_ || (queue_.front() == me && std::find(busy_.begin(), busy_.end(), false) != busy_.end());
  };
  const bool ready = cv_.wait_until(lock, deadline, my_turn);
  if (!ready || stopped_) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), me));
    pixels_ -= pixels;
    cv_.notify_all();  // the next in line may now be at the front
    t.outcome = stopped_ ? Outcome::kStopped : Outcome::kTimedOut;
    return t;
  }
  queue_.pop_front();
  t.slot = int(std::find(busy_.begin(), busy_.end(), false) - busy_.begin());
  busy_[size_t(t.slot)] = true;
  ++running_;
  t.outcome = Outcome::kRun;
  cv_.notify_all();  // another slot may be free for the next in line
  return t;
}

void Admission::release(const Ticket& t) {
  if (t.outcome != Outcome::kRun) return;
  std::lock_guard<std::mutex> lock(m_);
  busy_[size_t(t.slot)] = false;
  --running_;
  pixels_ -= t.pixels;
  cv_.notify_all();
}

void Admission::stop() {
  std::lock_guard<std::mutex> lock(m_);
  stopped_ = true;
  cv_.notify_all();
}

Admission::Stats Admission::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  return {running_, int(queue_.size()), pixels_};
}

const char* outcome_name(Admission::Outcome o) {
  switch (o) {
    case Admission::Outcome::kRun: return "run";
    case Admission::Outcome::kQueueFull: return "queue full";
    case Admission::Outcome::kTooManyPixels: return "too many pixels in flight";
    case Admission::Outcome::kTimedOut: return "timed out waiting";
    case Admission::Outcome::kStopped: return "server stopping";
  }
  return "?";
}

}  // namespace diffnet::serve
