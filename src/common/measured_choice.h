// A process-wide choice between ways of computing the same thing (the Linear backend, the convolutions'
// weight gradient): an enum value, 0 meaning "auto" (not chosen yet), fixed by set() or decided once, at the
// first get(): the environment variable `env` when it is set and not empty (its text read by `parse`, which
// throws on a name it does not know), else, or when it says "auto", `measure()`. Thread-safe.
#pragma once

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace diffnet {

template <typename Enum>
class MeasuredChoice {
 public:
  using Parse = Enum (*)(const std::string& text, const char* what);
  MeasuredChoice(const char* env, Parse parse, Enum (*measure)()) : env_(env), parse_(parse), measure_(measure) {}

  Enum get() {
    const int v = value_.load();
    if (v != 0) return static_cast<Enum>(v);
    std::call_once(decided_, [this] {
      int expected = 0;
      value_.compare_exchange_strong(expected, static_cast<int>(decide()));
    });
    return static_cast<Enum>(value_.load());
  }

  // A value; 0 ("auto") decides again (the environment, else a new measurement).
  void set(Enum v) { value_.store(static_cast<int>(static_cast<int>(v) != 0 ? v : decide())); }

 private:
  Enum decide() const {
    const char* text = std::getenv(env_);
    const Enum v = text && *text ? parse_(text, env_) : Enum{};
    return static_cast<int>(v) != 0 ? v : measure_();
  }

  const char* env_;
  Parse parse_;
  Enum (*measure_)();
  std::atomic<int> value_{0};
  std::once_flag decided_;
};

}  // namespace diffnet
