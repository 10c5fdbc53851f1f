#include "harness/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness/error.h"
#include "harness/results.h"
#include "harness/strings.h"

namespace sextant {

Journal::Journal(const std::string& base, const nlohmann::json& header) {
  std::error_code ec;  // the results folder was probed before the run, then left as it was
  const std::filesystem::path folder = std::filesystem::path(base).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    path_ = attempt == 0 ? base + ".journal" : cat(base, "-", attempt, ".journal");
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) throw RuntimeError(cat("cannot create the journal ", path_, ": ", std::strerror(errno)));
  nlohmann::json first = header;
  first["journal"] = kJournalFormat;
  append_line(first.dump());
}

Journal::~Journal() {
  if (fd_ >= 0) close(fd_);
}

std::string Journal::base() const { return path_.substr(0, path_.size() - std::string(".journal").size()); }

void Journal::append_case(const nlohmann::json& record) { append_line(nlohmann::json{{"case", record}}.dump()); }

// One write() per line (O_APPEND) then fsync: after a crash the file holds
// whole lines, and at most the last one torn.
void Journal::append_line(const std::string& line) {
  std::string text = line + "\n";
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RuntimeError(cat("cannot append to the journal ", path_, ": ", std::strerror(errno)));
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fsync(fd_) != 0 && errno != EINVAL)
    throw RuntimeError(cat("cannot fsync the journal ", path_, ": ", std::strerror(errno)));
}

RunSnapshot read_journal(const std::string& path, const std::string& option) {
  std::ifstream in(path);
  if (!in) throw UsageError(cat(option, " '", path, "' is not a readable file"));
  RunSnapshot s;
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    const bool last = in.peek() == EOF;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!header) {
      if (j.is_discarded() || !j.is_object() || j.value("journal", "") != kJournalFormat)
        throw UsageError(cat(option, " '", path, "' is not a sextant journal (first line: no \"journal\": \"",
                             kJournalFormat, "\")"));
      s.run = j.at("run");
      s.system = j.at("system");
      s.plan = j.value("plan", nlohmann::json());
      s.junit = j.value("junit", "");
      header = true;
      continue;
    }
    // A torn last line is a case that was being written when the run died.
    if ((j.is_discarded() || !j.contains("case")) && last) break;
    if (j.is_discarded() || !j.contains("case"))
      throw UsageError(cat(option, " '", path, "': a line of the journal is not a case record: ", line.substr(0, 80)));
    s.cases.push_back(j["case"]);
  }
  if (!header) throw UsageError(cat(option, " '", path, "' is empty: not a sextant journal"));
  return s;
}

RunSnapshot read_run_file(const std::string& path, const std::string& option) {
  std::ifstream in(path);
  if (!in) throw UsageError(cat(option, " '", path, "' is not a readable file"));
  std::string first;
  std::getline(in, first);
  if (first.find("\"journal\"") != std::string::npos) return read_journal(path, option);
  in.seekg(0);
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("schema", "") != kResultSchema)
    throw UsageError(
        cat(option, " '", path, "' is neither a sextant results file (", kResultSchema, ") nor a journal"));
  RunSnapshot s;
  s.run = doc["run"];
  s.system = doc["system"];
  s.plan = s.run.value("plan", nlohmann::json());
  s.cases = doc["cases"];
  s.complete = s.run.value("complete", true);
  return s;
}

nlohmann::json incomplete_document(const RunSnapshot& snapshot, const std::string& reason) {
  nlohmann::json run = snapshot.run;
  run["end"] = iso_time_now();
  run["complete"] = false;
  run["incomplete_reason"] = reason;
  if (!snapshot.plan.is_null()) run["plan"] = snapshot.plan;
  return results_document(run, snapshot.system, snapshot.cases);
}

WrittenFiles write_incomplete_results(const std::string& journal_path, const std::string& reason,
                                      const std::string& junit) {
  const std::string suffix = ".journal";
  if (journal_path.size() <= suffix.size() ||
      journal_path.compare(journal_path.size() - suffix.size(), suffix.size(), suffix) != 0)
    throw UsageError(cat("journal '", journal_path, "' must end in ", suffix));
  nlohmann::json doc = incomplete_document(read_journal(journal_path, "journal"), reason);
  WrittenFiles files;
  files.results = write_results_at(doc, journal_path.substr(0, journal_path.size() - suffix.size()));
  if (!junit.empty()) files.junit = write_junit(doc, junit);
  return files;
}

}  // namespace sextant
