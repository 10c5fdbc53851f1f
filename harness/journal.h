// The journal of a run: what has finished, on disk as it finishes, so that a
// run that dies (a timeout, a rank killed, the job cancelled) loses nothing it
// finished. JSON lines beside the results file (<base>.journal): a header
// line {"journal": "sextant.journal/1", "run", "system", "plan", "junit"},
// then one line {"case": record} per finished case instance, each appended
// with one write() and fsync()ed. A reader ignores a torn last line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace sextant {

constexpr const char* kJournalFormat = "sextant.journal/1";

class Journal {
 public:
  // Creates <base>.journal (or <base>-N.journal when taken; never over an
  // existing file) and writes the header line.
  Journal(const std::string& base, const nlohmann::json& header);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void append_case(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  // The results file's base (path() without ".journal").
  std::string base() const;

 private:
  void append_line(const std::string& line);
  std::string path_;
  int fd_ = -1;
};

// A run read back from a journal or a results file.
struct RunSnapshot {
  nlohmann::json run, system;
  nlohmann::json plan;  // null when the file has none (results written before run.plan existed)
  nlohmann::json cases = nlohmann::json::array();
  std::string junit;  // the run's --junit (journals only)
  bool complete = false;
};

// Reads a journal. Throws UsageError naming `option` when the file is not one.
RunSnapshot read_journal(const std::string& path, const std::string& option);
// Reads a journal or a results document (told apart by their first bytes).
RunSnapshot read_run_file(const std::string& path, const std::string& option);

// The results document of a run that did not finish: the finished cases, with
// run.complete false, run.incomplete_reason and a fresh run.end.
nlohmann::json incomplete_document(const RunSnapshot& snapshot, const std::string& reason);

// Written files of a finished or abandoned run.
struct WrittenFiles {
  std::string results, junit;
};
// Turns a journal into an incomplete results file beside it (named like the
// journal, .json) and JUnit when `junit` is non-empty (write_junit's rule).
// The journal stays; the caller removes it when it should.
WrittenFiles write_incomplete_results(const std::string& journal_path, const std::string& reason,
                                      const std::string& junit);

}  // namespace sextant
