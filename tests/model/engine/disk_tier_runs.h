// What the disk tier's model tests share: a temporary directory, long documents of their own per
// topic, a greedy request with its top-5 log-probabilities, and the bitwise comparison of two
// answers.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace drift::test {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/drift-model-kv-tier-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

// About 620 tokens (39 pages of 16) of text of its own per `topic`.
inline std::string document(const std::string& topic) {
  std::string text = "Notes on " + topic + ".\n";
  const char* lines[] = {
      "The first chapter describes how the work began and who took part in it.",
      "Several teams met every week to compare their measurements and plans.",
      "A later section lists the tools, the materials and what each one cost.",
      "The appendix gives the dates of every meeting and the decisions taken.",
      "Readers who want the details should start with the second chapter.",
  };
  for (int round = 0; round < 6; ++round)
    for (const char* line : lines)
      text += topic + " (" + std::to_string(round) + "): " + line + "\n";
  return text + "Summary of " + topic + ":";
}

struct Answer {
  std::vector<TokenId> tokens;
  std::vector<TokenLogprobs> logprobs;
};

inline Answer ask(Engine& engine, const std::string& prompt) {
  Request r;
  r.prompt = TextPrompt{prompt, true, false};
  r.max_tokens = 8;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = 5;
  Answer answer;
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  RequestHandle handle = engine.submit(std::move(r), [&](TokenEvent e) {
    std::lock_guard lock(mutex);
    if (e.token) answer.tokens.push_back(*e.token);
    if (e.logprobs) answer.logprobs.push_back(*e.logprobs);
    if (e.finish) {
      EXPECT_EQ(e.finish->reason, FinishReason::kLength) << e.finish->message;
      finished = true;
      done.notify_one();
    }
  });
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished; });
  return answer;
}

inline void expect_same(const Answer& got, const Answer& want, const char* what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  for (size_t k = 0; k < want.logprobs.size(); ++k)
    EXPECT_EQ(std::memcmp(&got.logprobs[k], &want.logprobs[k], sizeof(TokenLogprobs)), 0)
        << what << ": logprobs of token " << k << " differ";
}

inline const KVDiskMetrics& disk(const EngineMetrics& m) {
  EXPECT_TRUE(m.kv_disk.has_value());
  static const KVDiskMetrics none;
  return m.kv_disk ? *m.kv_disk : none;
}

// Overwrites one byte of the K/V of every page file under `dir` (another model's folder too).
inline void damage_every_page_file(const fs::path& dir) {
  for (const auto& folder : fs::directory_iterator(dir)) {
    if (!folder.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(folder.path())) {
      if (file.path().extension() != ".kvp") continue;
      std::fstream f(file.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-100, std::ios::end);
      f.put('\x55');
    }
  }
}

}  // namespace drift::test
