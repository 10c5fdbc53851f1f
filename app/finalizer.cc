#include "app/finalizer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "harness/journal.h"
#include "harness/strings.h"

namespace sextant {

void RunFinalizer::attach(const std::string& journal_path, const std::string& junit) {
  std::lock_guard lock(mutex_);
  journal_ = journal_path;
  junit_ = junit;
}

void RunFinalizer::abandon(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (written_) return;
  written_ = true;
  if (journal_.empty()) {
    std::fprintf(stderr, "sextant: no results written (the run writes no results file: --no-results)\n");
    return;
  }
  try {
    WrittenFiles files = write_incomplete_results(journal_, reason, junit_);
    unlink(journal_.c_str());  // the results file now holds everything the journal did
    std::string text = cat("sextant: incomplete results (", reason.substr(0, reason.find(';')), "): ", files.results);
    if (!files.junit.empty()) text += cat("\nsextant: junit: ", files.junit);
    std::fprintf(stderr, "%s\n", text.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "sextant: could not write the incomplete results (%s); the journal %s holds the finished "
                 "cases: sextant recover %s\n",
                 e.what(), journal_.c_str(), journal_.c_str());
  }
  std::fflush(stderr);
}

bool RunFinalizer::complete(const std::function<void()>& write_complete) {
  std::lock_guard lock(mutex_);
  if (written_) return false;
  written_ = true;
  write_complete();
  return true;
}

namespace {

int g_pipe[2] = {-1, -1};
constexpr int kHandled[] = {SIGTERM, SIGINT};
struct sigaction g_previous[2];

void on_signal_handler(int sig) {
  const int saved = errno;  // the interrupted code may be about to read errno
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_pipe[1], &byte, 1);
  errno = saved;
}

}  // namespace

TerminationHandler::TerminationHandler(std::function<void(const char*)> on_signal) : on_signal_(std::move(on_signal)) {
  if (pipe2(g_pipe, O_CLOEXEC) != 0) throw std::runtime_error(cat("pipe: ", std::strerror(errno)));
  thread_ = std::thread([this] { loop(); });
  struct sigaction action {};
  action.sa_handler = on_signal_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < 2; ++i) sigaction(kHandled[i], &action, &g_previous[i]);
}

TerminationHandler::~TerminationHandler() {
  for (int i = 0; i < 2; ++i) sigaction(kHandled[i], &g_previous[i], nullptr);
  const unsigned char stop = 0;
  [[maybe_unused]] ssize_t n = write(g_pipe[1], &stop, 1);
  thread_.join();
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

void TerminationHandler::loop() {
  unsigned char sig = 0;
  for (;;) {
    ssize_t n = read(g_pipe[0], &sig, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || sig == 0) return;  // the destructor's stop byte
    break;
  }
  on_signal_(sig == SIGINT ? "SIGINT" : "SIGTERM");
  // End the process the way the signal would have.
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace sextant
