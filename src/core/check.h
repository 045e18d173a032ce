// DI_CHECK: invariant violations abort with file:line. Not for user input (see status.h).
#pragma once

#include <cstdio>
#include <cstdlib>

#define DI_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#define DI_CHECK_MSG(cond, ...)                                                         \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);     \
      std::fprintf(stderr, __VA_ARGS__);                                                \
      std::fputc('\n', stderr);                                                         \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
