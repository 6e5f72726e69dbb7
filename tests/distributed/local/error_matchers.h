#pragma once
// EXPECT_ACC_ERROR(statement, {"part", ...}): the statement throws acc::Error whose message
// contains every part.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "acc/util/error.h"

#define EXPECT_ACC_ERROR(statement, ...)                                            \
  do {                                                                              \
    try {                                                                           \
      statement;                                                                    \
      ADD_FAILURE() << "expected acc::Error from: " #statement;                     \
    } catch (const acc::Error& e) {                                                 \
      for (const std::string& part : std::vector<std::string> __VA_ARGS__)          \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)              \
            << "message lacks '" << part << "': " << e.what();                      \
    }                                                                               \
  } while (0)
