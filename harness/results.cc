#include "harness/results.h"

#include <mpi.h>
#include <unistd.h>

#include <cblas.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <set>
#include <sstream>
#include <thread>

#include "harness/blas.h"
#include "harness/build_info.h"
#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "harness/system_info.h"
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
  if (r.config.fault_magnitude != 0) j["fault_magnitude"] = r.config.fault_magnitude;
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
  return {{"id", cat(start_time, "-", host_name(), "-", getpid())},
          {"start", start_time},
          {"end", iso_time_now()},
          {"command", command_line},
          {"git_sha", build_git_sha()},  // of the source this binary was built from
          {"git_dirty", build_git_dirty()},
          {"version", kVersion}};
}

nlohmann::json describe_system(Communicator& world, Device device, const std::string& backend) {
  std::vector<std::string> hosts;
  std::set<std::string> seen;
  for (const std::string& h : all_gather_strings(world, host_name()))
    if (seen.insert(h).second) hosts.push_back(h);
  // Ranks per node as MPI sees them (MPI_COMM_TYPE_SHARED), not from host names.
  const NodeMap nodes = detect_nodes(world);
  const nlohmann::json topology = describe_nodes(world, nodes);

  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi = split(std::string(mpi_version, static_cast<size_t>(length)), ',').front();

  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceInfo& d : describe_devices(device)) devices.push_back(d);
  nlohmann::json sys = {{"hosts", hosts},
                        {"world_size", world.size()},
                        {"ranks_per_node", max_ranks_per_node(nodes)},
                        {"node_count", node_count(nodes)},
                        {"topology", topology},
                        {"summary", system_summary(topology, device)},
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
  for (const CaseRecord& r : records) cases.push_back(to_json(r));
  return results_document(std::move(run), std::move(system), std::move(cases));
}

nlohmann::json results_document(nlohmann::json run, nlohmann::json system, nlohmann::json cases) {
  int pass = 0, fail = 0, skip = 0, errors = 0;
  for (const nlohmann::json& c : cases) {
    const std::string status = c["conformance"].value("status", "skip");
    if (c.contains("error")) ++errors;
    else if (status == kPass) ++pass;
    else if (status == kFail) ++fail;
    else ++skip;
  }
  run["summary"] = {{"cases", cases.size()}, {"pass", pass},    {"fail", fail},
                    {"skip", skip},          {"error", errors}, {"suspects", suspects_of(cases).size()}};
  return {{"schema", kResultSchema}, {"run", run}, {"system", system}, {"cases", cases}};
}

nlohmann::json suspects_of(const nlohmann::json& cases) {
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& c : cases) {
    const nlohmann::json* named = nullptr;
    if (c.contains("perf") && c["perf"].contains("metrics") && c["perf"]["metrics"].contains("suspects"))
      named = &c["perf"]["metrics"]["suspects"];
    if (!named || !named->is_array()) continue;
    for (nlohmann::json s : *named) {
      s["case"] = c.value("id", "");
      out.push_back(std::move(s));
    }
  }
  return out;
}

namespace {
std::string number_text(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  std::ostringstream out;
  out << std::setprecision(4) << v.get<double>();
  return out.str();
}
}  // namespace

std::string describe_suspect(const nlohmann::json& s) {
  std::ostringstream out;
  out << s.value("kind", "?");
  if (s.contains("ranks")) out << " ranks " << s["ranks"][0].get<int>() << "<->" << s["ranks"][1].get<int>();
  else if (s.contains("rank")) out << " rank " << s["rank"].get<int>();
  else out << " node " << s.value("node", -1);
  out << " (host " << s.value("host", "?");
  if (s.contains("gpu") && s["gpu"].is_number()) out << ", gpu " << s["gpu"].get<int>();
  if (s.contains("gpu_uuid") && s["gpu_uuid"].is_string()) out << " " << s["gpu_uuid"].get<std::string>();
  out << "): ";
  if (s.contains("tensor"))
    out << s["tensor"].get<std::string>() << " differs from the majority in " << s.value("repeats_bad", 0) << " of "
        << s.value("repeats", 0) << " repeats, " << s.value("differing_elements", 0) << " elements, the first at "
        << s.value("first_index", -1);
  else if (s.value("class_median", nlohmann::json()).is_null())
    out << s.value("figure", "?") << " " << number_text(s.value("value", nlohmann::json()));
  else
    out << s.value("figure", "?") << " " << number_text(s.value("value", nlohmann::json())) << " against the "
        << s.value("class", "?") << " median " << number_text(s.value("class_median", nlohmann::json()));
  if (s.value("retested", false))
    out << " (measured alone; " << number_text(s.value("tournament_value", nlohmann::json())) << " in its round)";
  out << "; rule: " << s.value("rule", "?");
  return out.str();
}

namespace {
// Why no file can be created in dir (after creating dir if needed), or "".
// Creates the folder and a file in it, then removes both again: a refused
// run leaves nothing behind, not even an empty folder.
std::string probe_dir(const std::string& dir) {
  std::error_code ec;
  fs::path created = fs::absolute(dir, ec);  // the outermost folder this probe creates
  for (fs::path p = created; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created = p;
    if (p == p.parent_path()) break;
  }
  const bool existed = fs::exists(created, ec);
  fs::create_directories(dir, ec);
  auto undo = [&] {
    if (!existed) fs::remove_all(created, ec);
  };
  if (!fs::is_directory(dir)) {
    undo();
    return "it is not a directory that can be created";
  }
  std::string probe = cat(dir, "/.sextant-probe-XXXXXX");
  int fd = mkstemp(probe.data());
  if (fd < 0) {
    const std::string why = cat("cannot create a file there (", std::strerror(errno), ")");
    undo();
    return why;
  }
  close(fd);
  unlink(probe.c_str());
  undo();
  return "";
}

bool names_folder(const std::string& target) { return target.back() == '/' || fs::is_directory(target); }
}  // namespace

void require_writable_dir(const std::string& dir, const std::string& option) {
  const std::string why = probe_dir(dir);
  if (why.rfind("it is not a directory", 0) == 0)
    throw UsageError(cat(option, " '", dir, "' is not a directory that can be created"));
  if (!why.empty()) throw UsageError(cat(option, " '", dir, "' is not writable: ", why));
}

nlohmann::json read_results_file(const std::string& path, const std::string& option) {
  std::ifstream in(path);
  require(in.good(), cat(option, " '", path, "' is not a readable file"));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(cat(option, " '", path, "' is not JSON: ", e.what()));
  }
  require(doc.value("schema", "") == "sextant.result/1" && doc.contains("cases") && doc["cases"].is_array(),
          cat(option, " '", path, "' is not a sextant results file (schema sextant.result/1)"));
  return doc;
}

void require_writable_file(const std::string& path, const std::string& option) {
  if (path.empty() || names_folder(path)) throw UsageError(cat(option, " '", path, "' must name a file"));
  std::string parent = fs::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  const std::string why = probe_dir(parent);
  if (!why.empty()) throw UsageError(cat(option, " '", path, "' cannot be written: folder '", parent, "': ", why));
}

void require_writable_junit(const std::string& target) {
  if (target.empty()) throw UsageError("--junit '' must name a file or a folder");
  if (names_folder(target)) return require_writable_dir(target, "--junit");
  require_writable_file(target, "--junit");
}

std::string results_base(const std::string& dir, const std::string& run_id) {
  std::string name = run_id;
  for (char& c : name) c = (c == ':' || c == '/') ? '-' : c;
  return (fs::path(dir) / ("sextant-" + name)).string();
}

namespace {
// Writes text to a temporary file and links it to the first free name that
// `candidate(attempt)` gives: link() fails rather than replace a file, so no
// run ever overwrites another's.
std::string write_unique(const std::string& text, const std::string& tmp,
                         const std::function<std::string(int attempt)>& candidate) {
  std::error_code ec;  // the folder was probed before the run, then left as it was
  const fs::path folder = fs::path(tmp).parent_path();
  if (!folder.empty()) fs::create_directories(folder, ec);
  {
    std::ofstream out(tmp);
    out << text;
    out.flush();
    if (!out) throw RuntimeError("cannot write " + tmp);
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string path = candidate(attempt);
    if (link(tmp.c_str(), path.c_str()) == 0) {
      unlink(tmp.c_str());
      return path;
    }
    if (errno != EEXIST) break;
  }
  int error = errno;
  unlink(tmp.c_str());
  throw RuntimeError(cat("could not write ", candidate(0), " (", std::strerror(error), ")"));
}
}  // namespace

std::string write_results_at(const nlohmann::json& doc, const std::string& base) {
  return write_unique(doc.dump(1) + "\n", cat(base, ".json.tmp-", getpid()),
                      [&](int attempt) { return attempt == 0 ? base + ".json" : cat(base, "-", attempt, ".json"); });
}

std::string write_results(const nlohmann::json& doc, const std::string& dir) {
  return write_results_at(doc, results_base(dir, doc["run"]["id"].get<std::string>()));
}

namespace {
// sextant qualify's verdict: one test case per criterion (a criterion that
// could not be measured is skipped, with the reason).
std::string junit_qualification(const nlohmann::json& q) {
  int failures = 0, skipped = 0;
  for (const nlohmann::json& r : q["criteria"]) {
    failures += r["status"] == "FAIL";
    skipped += r["status"] != "FAIL" && r["status"] != "PASS";
  }
  std::ostringstream out;
  out << "  <testsuite name=\"qualify\" tests=\"" << q["criteria"].size() << "\" failures=\"" << failures
      << "\" errors=\"0\" skipped=\"" << skipped << "\">\n";
  for (const nlohmann::json& r : q["criteria"]) {
    const std::string status = r["status"].get<std::string>();
    out << "    <testcase classname=\"sextant.qualify\" name=\"" << xml_escape(r["criterion"].get<std::string>())
        << "\" time=\"0\">";
    const std::string detail =
        cat("measured ", r["measured"].dump(), " ", r["unit"].get<std::string>(), ", ", r["bound"].get<std::string>(),
            " ", r["threshold"].dump(), " (", r["threshold_source"].get<std::string>(), ")");
    if (status == "FAIL") out << "<failure message=\"" << xml_escape(detail) << "\"/>";
    else if (status != "PASS")
      out << "<skipped message=\"" << xml_escape(status + ": " + r["note"].get<std::string>()) << "\"/>";
    out << "</testcase>\n";
  }
  out << "  </testsuite>\n";
  return out.str();
}

std::string junit_xml(const nlohmann::json& run, const nlohmann::json& cases, const nlohmann::json& qualification) {
  std::map<std::string, std::vector<const nlohmann::json*>> by_suite;
  for (const nlohmann::json& c : cases) by_suite[c["suite"].get<std::string>()].push_back(&c);
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"sextant\">\n";
  auto status = [](const nlohmann::json& c) { return c["conformance"].value("status", "skip"); };
  for (const auto& [suite, list] : by_suite) {
    int failures = 0, errors = 0, skipped = 0;
    for (const nlohmann::json* c : list) {
      if (c->contains("error")) ++errors;
      else if (status(*c) == kFail) ++failures;
      else if (status(*c) == kSkip) ++skipped;
    }
    out << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << list.size() << "\" failures=\"" << failures
        << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\">\n";
    for (const nlohmann::json* c : list) {
      const nlohmann::json& time = (*c)["perf"]["time"];
      double seconds = time.empty() ? 0.0 : time.begin().value()["median"].get<double>();
      out << "    <testcase classname=\"sextant." << xml_escape(suite) << "\" name=\""
          << xml_escape((*c)["id"].get<std::string>()) << "\" time=\"" << seconds << "\">";
      if (c->contains("error")) {
        out << "<error message=\"" << xml_escape((*c)["error"].get<std::string>()) << "\"/>";
      } else if (status(*c) == kFail) {
        std::string text;
        for (const nlohmann::json& f : (*c)["conformance"]["failures"]) text += f.get<std::string>() + "\n";
        out << "<failure message=\"conformance failed\">" << xml_escape(text) << "</failure>";
      } else if (status(*c) == kSkip) {
        out << "<skipped message=\"not checked\"/>";
      }
      out << "</testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  // An interrupted run is a failure a JUnit reader must see, whatever the cases say.
  if (!run.value("complete", true)) {
    out << "  <testsuite name=\"run\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">\n"
        << "    <testcase classname=\"sextant.run\" name=\"run complete\" time=\"0\"><error message=\""
        << xml_escape(run.value("incomplete_reason", "the run did not finish")) << "\"/></testcase>\n"
        << "  </testsuite>\n";
  }
  if (qualification.is_object()) out << junit_qualification(qualification);
  out << "</testsuites>\n";
  return out.str();
}
}  // namespace

std::string write_junit(const nlohmann::json& doc, const std::string& target) {
  const std::string run_id = doc["run"]["id"].get<std::string>();
  std::string xml = junit_xml(doc["run"], doc["cases"], doc.value("qualification", nlohmann::json()));
  if (names_folder(target)) {
    const std::string base = results_base(target, run_id);
    return write_unique(xml, cat(base, ".xml.tmp-", getpid()),
                        [&](int attempt) { return attempt == 0 ? base + ".xml" : cat(base, "-", attempt, ".xml"); });
  }
  fs::path path(target);
  const std::string stem = (path.parent_path() / path.stem()).string(), ext = path.extension().string();
  const std::string id = fs::path(results_base("", run_id)).filename().string().substr(sizeof("sextant-") - 1);
  return write_unique(xml, cat(target, ".tmp-", getpid()), [&](int attempt) {
    if (attempt == 0) return target;
    return attempt == 1 ? cat(stem, "-", id, ext) : cat(stem, "-", id, "-", attempt - 1, ext);
  });
}

}  // namespace sextant
