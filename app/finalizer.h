// The end of a run on world rank 0, written exactly once: the complete
// results when the run finishes, or, when it cannot finish, an incomplete
// results file made from the journal, whoever gets there first: the signal
// thread (SIGTERM, SIGINT), the watchdog (timeout) or the error path.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sextant {

class RunFinalizer {
 public:
  // The journal to turn into results if the run is abandoned, and the run's
  // --junit (empty: none).
  void attach(const std::string& journal_path, const std::string& junit);

  // Writes the incomplete results (and JUnit) from the journal with `reason`
  // unless the run's end was already written; reports on stderr. Never
  // throws: it runs where the run is already failing.
  void abandon(const std::string& reason);

  // Runs `write_complete` unless the run was abandoned first. Returns whether
  // it ran.
  bool complete(const std::function<void()>& write_complete);

 private:
  std::mutex mutex_;
  bool written_ = false;
  std::string journal_, junit_;
};

// While it lives, SIGTERM and SIGINT run `on_signal` (with the signal's
// name) and then end the process with that signal (the exit status mpirun
// reports). World rank 0 abandons the run there; the other ranks linger.
//
// A signal handler may only call async-signal-safe functions (signal-safety(7)):
// no malloc, no stdio, no locks, so it cannot read JSON or write files. The
// handler writes the signal number into a pipe (write() is safe) and returns;
// a thread blocked on the pipe's other end does the real work in ordinary
// context. sigwait()/signalfd would need the signals blocked in every
// thread, but OpenBLAS and OpenMPI start threads before main() and
// MPI_Init() return, and a signal delivered to one of those would take its
// default action; a handler runs whichever thread the kernel picks.
//
// OpenMPI 4.1's mpirun ends a job (a rank died, or mpirun got SIGTERM or
// SIGINT) with SIGCONT, then SIGTERM after odls_base_sigkill_timeout (1 s),
// then SIGKILL once that much more time has passed or, in practice, as soon
// as one rank has exited (a child's SIGCHLD cuts its wait short). So the
// ranks other than 0 linger after SIGTERM (kLingerSeconds) instead of dying
// at once, which leaves rank 0 the second it needs to write.
class TerminationHandler {
 public:
  static constexpr double kLingerSeconds = 2;
  explicit TerminationHandler(std::function<void(const char* signal_name)> on_signal);
  ~TerminationHandler();
  TerminationHandler(const TerminationHandler&) = delete;
  TerminationHandler& operator=(const TerminationHandler&) = delete;

 private:
  void loop();
  std::function<void(const char*)> on_signal_;
  std::thread thread_;
};

}  // namespace sextant
