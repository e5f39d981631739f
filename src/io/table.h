// Table: left-aligned text columns sized to their widest cell, the way
// kubectl prints them. Used by every human-readable writer.
#pragma once

#include <string>
#include <vector>

namespace unipool::io {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  // REQUIRES: cells.size() == header size.
  void Add(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace unipool::io
