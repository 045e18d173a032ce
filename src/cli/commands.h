// The subcommands of the deepinfer binary. Each lives in its own <name>_command.cpp, which
// registers itself at static-initialization time:
//   const bool kRegistered = register_command(&add_tokenize_command);
// An add function declares the subcommand and its options on the app and sets `run`, through
// the subcommand's callback, to what executes it; run's return value is the exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace deepinfer::cli {

using Runner = std::function<int()>;
using AddCommand = void (*)(CLI::App& app, Runner& run);

// Registered add functions, in registration order.
std::vector<AddCommand>& registered_commands();
inline bool register_command(AddCommand add) {
  registered_commands().push_back(add);
  return true;
}

}  // namespace deepinfer::cli
