// json_bounded.hpp — nlohmann::json::parse with a nesting limit, for every JSON that
// cnnscale reads (run.json, metrics.jsonl lines, run.lock, dataset.json, TF_CONFIG, the
// --json results the report reads). nlohmann parses deep nesting fine, but copying,
// printing or comparing such a document recurses once per level: a metrics line of
// 300,000 nested '[' (under watch's 1 MiB line cap) killed `cnnscale watch` with SIGSEGV
// (issue 48 item 10). No file cnnscale writes nests deeper than 5 levels.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace cnnscale {

constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not
// count; the text need not be valid JSON).
int json_nesting_depth(std::string_view text);

// nlohmann::json::parse(text), after refusing a text nested deeper than kMaxJsonDepth
// with nlohmann::json::out_of_range ("nested deeper than 64 levels"), so that callers'
// handlers of malformed JSON (they catch nlohmann::json::exception) name the file.
nlohmann::json parse_json(std::string_view text);

}  // namespace cnnscale
