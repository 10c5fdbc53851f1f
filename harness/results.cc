#include "harness/results.h"

#include <mpi.h>
#include <unistd.h>

#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness/blas.h"
#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "harness/version.h"

namespace fs = std::filesystem;

namespace sextant {

nlohmann::json to_json(const CaseRecord& r) {
  nlohmann::json time = nlohmann::json::object();
  for (const auto& [region, stats] : r.times) time[region] = stats;
  nlohmann::json j = {
      {"suite", r.config.suite},
      {"case", r.config.name},
      {"id", r.config.id()},
      {"params", r.config.params},
      {"parallel", r.config.parallel},
      {"ranks", r.config.ranks},
      {"dtype", dtype_name(r.config.dtype)},
      {"device", device_name(r.device)},
      {"backend", r.backend},
      {"fault", r.config.fault_name().empty() ? nlohmann::json(nullptr) : nlohmann::json(r.config.fault_name())},
      {"conformance", r.conformance},
      {"perf", {{"time", time}, {"metrics", r.metrics}}},
  };
  if (!r.error.empty()) j["error"] = r.error;
  if (!r.skip_reason.empty()) j["skipped"] = r.skip_reason;
  return j;
}

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

namespace {
std::string command_output(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

nlohmann::json describe_run(const std::string& command_line, const std::string& start_time) {
  std::string sha = command_output(cat("git -C '", kSourceDir, "' rev-parse --short=12 HEAD 2>/dev/null"));
  std::string dirty = command_output(cat("git -C '", kSourceDir, "' status --porcelain --untracked-files=no 2>/dev/null"));
  return {{"id", cat(start_time, "-", host_name(), "-", getpid())},
          {"start", start_time},
          {"end", iso_time_now()},
          {"command", command_line},
          {"git_sha", sha.empty() ? std::string(kGitSha) : sha + (dirty.empty() ? "" : "-dirty")},
          {"version", kVersion}};
}

nlohmann::json describe_system(Communicator& world, Device device, const std::string& backend) {
  std::vector<std::string> hosts;
  std::map<std::string, int> per_host;
  for (const std::string& h : all_gather_strings(world, host_name()))
    if (per_host[h]++ == 0) hosts.push_back(h);
  int ranks_per_node = 0;
  for (const auto& [h, n] : per_host) ranks_per_node = std::max(ranks_per_node, n);

  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi = split(std::string(mpi_version, static_cast<size_t>(length)), ',').front();

  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceInfo& d : describe_devices(device)) devices.push_back(d);
  nlohmann::json sys = {{"hosts", hosts},
                        {"world_size", world.size()},
                        {"ranks_per_node", ranks_per_node},
                        {"backend", backend},
                        {"device_kind", device_name(device)},
                        {"devices", devices},
                        {"cpu", cpu_model()},
                        {"cores", std::thread::hardware_concurrency()},
                        {"mpi", mpi},
                        {"blas", openblas_get_config()},
                        {"blas_threads", openblas_get_num_threads()},
                        {"blas_core", blas_core()},
                        {"compiler", kCompiler},
                        {"cuda_built", cuda_built()}};
  for (const auto& [key, value] : cuda_versions()) sys[key] = value;
  return sys;
}

nlohmann::json results_document(nlohmann::json run, nlohmann::json system, const std::vector<CaseRecord>& records) {
  nlohmann::json cases = nlohmann::json::array();
  int pass = 0, fail = 0, skip = 0, errors = 0;
  for (const CaseRecord& r : records) {
    cases.push_back(to_json(r));
    if (!r.error.empty()) ++errors;
    else if (r.conformance.status == "pass") ++pass;
    else if (r.conformance.status == "fail") ++fail;
    else ++skip;
  }
  run["summary"] = {{"cases", records.size()}, {"pass", pass}, {"fail", fail}, {"skip", skip}, {"error", errors}};
  return {{"schema", kResultSchema}, {"run", run}, {"system", system}, {"cases", cases}};
}

void require_writable_dir(const std::string& dir, const std::string& option) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) throw UsageError(cat(option, " '", dir, "' is not a directory that can be created"));
  if (access(dir.c_str(), W_OK) != 0) throw UsageError(cat(option, " '", dir, "' is not writable"));
}

std::string write_results(const nlohmann::json& doc, const std::string& dir) {
  std::string stamp = doc["run"]["start"].get<std::string>();
  for (char& c : stamp) c = (c == ':' ? '-' : c);
  std::string base = cat(dir, "/sextant-", stamp, "-", host_name(), "-", getpid());
  std::string tmp = base + ".json.tmp";
  {
    std::ofstream out(tmp);
    out << doc.dump(1) << "\n";
    if (!out) throw RuntimeError("cannot write " + tmp);
  }
  // link() fails rather than replace an existing file: never overwrite a run.
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string path = attempt == 0 ? base + ".json" : cat(base, "-", attempt, ".json");
    if (link(tmp.c_str(), path.c_str()) == 0) {
      unlink(tmp.c_str());
      return path;
    }
  }
  unlink(tmp.c_str());
  throw RuntimeError("could not find a free results file name near " + base);
}

namespace {
std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}
}  // namespace

void write_junit(const std::vector<CaseRecord>& records, const std::string& path) {
  std::map<std::string, std::vector<const CaseRecord*>> by_suite;
  for (const CaseRecord& r : records) by_suite[r.config.suite].push_back(&r);
  std::string tmp = path + ".tmp";
  std::ofstream out(tmp);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"sextant\">\n";
  for (const auto& [suite, list] : by_suite) {
    int failures = 0, errors = 0, skipped = 0;
    for (const CaseRecord* r : list) {
      if (!r->error.empty()) ++errors;
      else if (r->conformance.status == "fail") ++failures;
      else if (r->conformance.status == "skip") ++skipped;
    }
    out << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << list.size() << "\" failures=\"" << failures
        << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\">\n";
    for (const CaseRecord* r : list) {
      double seconds = r->times.empty() ? 0.0 : r->times.begin()->second.median;
      out << "    <testcase classname=\"sextant." << xml_escape(suite) << "\" name=\"" << xml_escape(r->config.id())
          << "\" time=\"" << seconds << "\">";
      if (!r->error.empty()) {
        out << "<error message=\"" << xml_escape(r->error) << "\"/>";
      } else if (r->conformance.status == "fail") {
        std::string text;
        for (const std::string& f : r->conformance.failures) text += f + "\n";
        out << "<failure message=\"conformance failed\">" << xml_escape(text) << "</failure>";
      } else if (r->conformance.status == "skip") {
        out << "<skipped message=\"not checked\"/>";
      }
      out << "</testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  out.close();
  if (!out) throw RuntimeError("cannot write " + tmp);
  fs::rename(tmp, path);
}

}  // namespace sextant
