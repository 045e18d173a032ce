// deepinfer: one binary, one subcommand per job (generate, tokenize, serve, ...).
#include "cli/commands.h"

namespace deepinfer::cli {
std::vector<AddCommand>& registered_commands() {
  static std::vector<AddCommand> commands;
  return commands;
}
}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  CLI::App app{"DeepInfer: an inference engine for DeepSeek-architecture language models"};
  app.require_subcommand(1);
  deepinfer::cli::Runner run;
  for (auto add : deepinfer::cli::registered_commands()) add(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return run ? run() : 2;
}
