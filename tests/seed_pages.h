// Reads the examples printed on the ONNX operator pages (../shared/seeds): node, attributes,
// inputs and outputs with their values, parsed from the page text alone.
#pragma once

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace cumulus::testing {

struct PageTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<std::string> tokens;  // the printed numbers, in order
  std::string text;                 // the printed lines, indentation removed
};

struct PageExample {
  std::string test_name, op;
  std::map<std::string, int64_t> attributes;
  std::vector<PageTensor> inputs, outputs;
};

inline std::string read_page(const std::string& file) {
  std::ifstream in(std::string(CUMULUS_SEEDS_DIR) + "/" + file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

inline std::vector<PageExample> parse_page(const std::string& text) {
  static const std::regex kTest(R"(^\**(test_\w+)\**$)");
  static const std::regex kNode(R"(^(\w+)\(.*\) -> \(.*\)$)");
  static const std::regex kAttr(R"(^(\w+) = (-?\d+)$)");
  static const std::regex kHeader(R"(^(\w+): shape=\(([^)]*)\), dtype=(\w+)$)");
  static const std::regex kValues(R"(^[-+\[\], .0-9eEnaif]+$)");
  std::vector<PageExample> out;
  std::vector<PageTensor>* section = nullptr;
  PageTensor* tensor = nullptr;
  std::size_t value_indent = 0;
  std::istringstream lines(text);
  std::string raw;
  std::smatch m;
  while (std::getline(lines, raw)) {
    const std::string line = trim(raw);
    if (std::regex_match(line, m, kTest)) {
      out.push_back({m[1], "", {}, {}, {}});
      section = nullptr;
      tensor = nullptr;
      continue;
    }
    if (out.empty()) continue;
    PageExample& ex = out.back();
    if (line == "Inputs:") {
      section = &ex.inputs;
      tensor = nullptr;
    } else if (line == "Outputs:") {
      section = &ex.outputs;
      tensor = nullptr;
    } else if (ex.op.empty() && std::regex_match(line, m, kNode)) {
      ex.op = m[1];
    } else if (section == nullptr && std::regex_match(line, m, kAttr)) {
      ex.attributes[m[1]] = std::stoll(m[2]);
    } else if (section != nullptr && std::regex_match(line, m, kHeader)) {
      PageTensor t{m[1], m[3], {}, {}, ""};
      std::stringstream dims(m[2].str());
      for (std::string d; std::getline(dims, d, ',');) {
        if (!trim(d).empty()) t.shape.push_back(std::stoll(d));
      }
      section->push_back(t);
      tensor = &section->back();
      value_indent = 0;
    } else if (tensor != nullptr && std::regex_match(line, kValues)) {
      const std::size_t indent = raw.find_first_not_of(' ');
      if (value_indent == 0) value_indent = indent;
      tensor->text += raw.substr(std::min(indent, value_indent)) + "\n";
      std::string cleaned = line;
      for (char& c : cleaned) {
        if (c == '[' || c == ']' || c == ',') c = ' ';
      }
      std::istringstream words(cleaned);
      for (std::string w; words >> w;) tensor->tokens.push_back(w);
    } else if (tensor != nullptr && line.empty() && !tensor->text.empty()) {
      tensor->text += "\n";  // blank lines inside a 3-D array
    } else if (tensor != nullptr && !line.empty()) {
      tensor = nullptr;
    }
  }
  for (auto& ex : out) {
    for (auto* list : {&ex.inputs, &ex.outputs}) {
      for (auto& t : *list) {
        while (t.text.size() >= 2 && t.text.substr(t.text.size() - 2) == "\n\n") t.text.pop_back();
      }
    }
  }
  return out;
}

}  // namespace cumulus::testing
