// Runs a program in a process of its own, through the shell, and collects
// its exit status and output: for tests of what happens at process exit.
#pragma once

#include <array>
#include <cstdio>
#include <string>

namespace depengine::test {

struct ProgramOutcome {
  int status = -1;     // as pclose reports it (WIFEXITED, WEXITSTATUS)
  std::string output;  // stdout and stderr
};

// Runs `command` (a shell command line; stderr is added to the output).
inline ProgramOutcome RunProgram(const std::string& command) {
  ProgramOutcome out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out.output += buf.data();
  out.status = pclose(pipe);
  return out;
}

}  // namespace depengine::test
