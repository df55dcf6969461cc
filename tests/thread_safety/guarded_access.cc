// Compiled by clang with -Wthread-safety -Werror (tests/thread_safety/
// CMakeLists.txt): with VAED_BREAK_THE_LOCK defined it reads a
// VAED_GUARDED_BY field without its mutex and must NOT compile; without it
// it must. Proves the analysis of vaed/mutex.h's annotations is on and
// bites.
#include <condition_variable>

#include "vaed/mutex.h"

namespace {

class Counter {
 public:
  void Add() {
    vaed::MutexLock lock(&mu_);
    ++value_;
    cv_.notify_all();
  }
  int WaitForNonZero() {
    vaed::MutexLock lock(&mu_);
    while (value_ == 0) cv_.wait(mu_);
    return value_;
  }
  int Peek() const VAED_REQUIRES(mu_) { return value_; }
#if defined(VAED_BREAK_THE_LOCK)
  int Racy() const { return value_; }  // no lock held: an error
#endif

 private:
  mutable vaed::Mutex mu_;
  std::condition_variable_any cv_;
  int value_ VAED_GUARDED_BY(mu_) = 0;
};

}  // namespace

int main() {
  Counter c;
  c.Add();
  return c.WaitForNonZero() == 1 ? 0 : 1;
}
