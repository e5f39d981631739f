// ApiServer::Call: one request in flight, with the checks every handler
// shares (role, query parameters, body fields, ids). Private to the API's
// files (api*.cc). Each check answers the request with an error and
// returns false when it fails, so handlers read as
//   if (!c.Allow({...}) || !c.Query({...})) return;
#pragma once

#include <initializer_list>
#include <string>

#include "io/job_spec.h"
#include "io/yaml_fields.h"
#include "server/api.h"

namespace unipool::server {

int HttpCode(StatusCode c);
// JSON whose objects have distinct keys (nlohmann would keep the last of a
// duplicate silently); *dup names the first duplicate.
Json ParseJsonNoDuplicates(const std::string& text, std::string* dup);
// A positive integer of at most 18 digits.
bool ParseId(const std::string& s, int64_t* out);

constexpr int64_t kMaxWatchSeconds = 300;
constexpr int64_t kMaxPage = 1000;
// A list answer stops at this many bytes of items (and says where to
// continue), whatever the limit: memory per request stays bounded.
constexpr size_t kMaxPageBytes = 4 << 20;

struct ApiServer::Call {
  HttpRequest& req;
  HttpResponse& res;
  Principal who;
  Scope scope;

  const std::string& Path(int i) const { return req.matches[i]; }
  void Reply(int status, const Json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }
  void Fail(const Status& st) {
    res.status = HttpCode(st.code());
    res.set_content(ErrorBody(StatusCodeName(st.code()), st.ToString()), "application/json");
    if (res.status == 429 || res.status == 503) res.set_header("Retry-After", "1");
  }
  bool Bad(const std::string& message) {
    Fail(InvalidArgument(message));
    return false;
  }
  // Only these roles may call; others get 403.
  bool Allow(std::initializer_list<Role> roles);
  // Agents act only on their own node.
  bool OwnNode(const std::string& node);
  // Every query parameter must be one of `known`, and appear once unless
  // listed in `repeatable`.
  bool Query(std::initializer_list<const char*> known,
             std::initializer_list<const char*> repeatable = {});
  // An integer query parameter in [lo, hi], or `def` when absent.
  bool Int(const char* key, int64_t lo, int64_t hi, int64_t def, int64_t* out);
  // The request body as a JSON object; `allowed` lists its fields.
  bool Body(std::initializer_list<const char*> allowed, Json* out, bool required = true);
  // The request body as a JSON object whose fields the caller checks.
  bool AnyBody(Json* out);
  bool String(const Json& body, const char* key, size_t max, std::string* out,
              bool required = false);
  bool JobId(int64_t* id);
};

}  // namespace unipool::server
