// Locks the compiler checks: a mutex, its scoped lock and the annotations
// of clang's thread-safety analysis (-Wthread-safety), as leveldb's
// port/thread_annotations.h and util/mutexlock.h do. State a mutex guards
// is declared VAED_GUARDED_BY(mu_); functions that must be called with it
// held are VAED_REQUIRES(mu_); clang then refuses, at compile time, an
// access without the lock. gcc ignores the annotations (the clang build of
// scripts/sanitize.sh checks them, with -Werror).
//
// Condition variables: std::condition_variable_any waits on a Mutex. Wait
// in an explicit loop over the condition (the analysis cannot see into a
// predicate lambda):
//
//   MutexLock lock(&mu_);
//   while (!ready_) cv_.wait(mu_);
//
// Thread-safety: Mutex is a std::mutex; MutexLock belongs to one thread.
#ifndef VAED_MUTEX_H_
#define VAED_MUTEX_H_

#include <mutex>

#if defined(__clang__)
#define VAED_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define VAED_THREAD_ANNOTATION_(x)
#endif

#define VAED_CAPABILITY(x) VAED_THREAD_ANNOTATION_(capability(x))
#define VAED_SCOPED_CAPABILITY VAED_THREAD_ANNOTATION_(scoped_lockable)
#define VAED_GUARDED_BY(x) VAED_THREAD_ANNOTATION_(guarded_by(x))
#define VAED_PT_GUARDED_BY(x) VAED_THREAD_ANNOTATION_(pt_guarded_by(x))
#define VAED_REQUIRES(...) VAED_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define VAED_ACQUIRE(...) VAED_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define VAED_RELEASE(...) VAED_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define VAED_TRY_ACQUIRE(...) VAED_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define VAED_EXCLUDES(...) VAED_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define VAED_RETURN_CAPABILITY(x) VAED_THREAD_ANNOTATION_(lock_returned(x))
#define VAED_NO_THREAD_SAFETY_ANALYSIS VAED_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace vaed {

class VAED_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() VAED_ACQUIRE() { mu_.lock(); }
  void unlock() VAED_RELEASE() { mu_.unlock(); }
  bool try_lock() VAED_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope.
class VAED_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) VAED_ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() VAED_RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace vaed

#endif  // VAED_MUTEX_H_
