// The router's API-key check, as `deepinfer serve` does it: "Authorization: Bearer KEY" (the
// scheme in any case), compared in time that depends only on the lengths.
#pragma once

#include <string>

namespace deepinfer::router {

// True when `key` is empty (no authentication) or `authorization` carries it.
bool bearer_authorized(const std::string& authorization, const std::string& key);

}  // namespace deepinfer::router
