// The web dashboard's files (src/server/web/: HTML, CSS and JavaScript, no
// build step), compiled into the binary by cmake/embed_web.cmake, so that
// `unipool server` serves them with nothing installed beside it and nothing
// fetched at run time (docs/ui.md).
#pragma once

#include <string_view>

namespace unipool::server {

struct WebAsset {
  std::string_view path;          // "/" (index.html) or "/ui/NAME"
  std::string_view content_type;  // by the file's extension
  std::string_view body;
};

// The asset served at `path`, or null.
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace unipool::server
