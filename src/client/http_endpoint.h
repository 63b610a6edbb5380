#pragma once
// Coordinator endpoints and the bearer token as the client library takes them from its
// options: parsing and checks only (no I/O), shared by the HTTP transport, the option checks
// (client_options.h) and the simulator, which builds its clients from the same options.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rsc::client {

struct HttpEndpoint {
  std::string host;
  int port = 0;
  std::string ToString() const;
};

// Accepts "host:port", "http://host:port" (a trailing "/" is ignored) and "[v6]:port".
// nullopt (and *error) for anything else; https is refused (not implemented).
std::optional<HttpEndpoint> ParseHttpEndpoint(std::string_view text, std::string* error);

// A coordinator bearer token (SPEC O4) that can be sent: 1..1024 printable ASCII characters
// without blanks (the coordinator accepts no others).
bool IsValidBearerToken(std::string_view token);
// The `Authorization: Bearer <token>` header for HttpTransport::Request; none for "".
// Precondition: token is "" or IsValidBearerToken.
std::vector<std::pair<std::string, std::string>> BearerHeaders(const std::string& token);

}  // namespace rsc::client
