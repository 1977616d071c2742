// StderrCapture: sends file descriptor 2 into a temporary file for as long
// as it lives, and lets a test wait until some text shows up there.
//
// gtest's CaptureStderr only hands the text over when the capture ends, so
// a test of something that reports on stderr from another thread (the
// watchdog) had to sleep for a fixed time and hope. Here the test waits for
// the report itself, up to a generous deadline, and goes on the moment it
// appears: no fixed sleep to outlast on a loaded machine.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>  // mkstemp
#include <stdexcept>
#include <string>
#include <thread>

#include "wait_timeout.h"

namespace depengine::support {

class StderrCapture {
 public:
  StderrCapture() {
    char path[] = "/tmp/depengine-stderr-XXXXXX";
    file_ = mkstemp(path);
    if (file_ < 0) throw std::runtime_error("StderrCapture: mkstemp failed");
    unlink(path);  // gone when the last descriptor closes
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    if (saved_ < 0 || dup2(file_, STDERR_FILENO) < 0) {
      if (saved_ >= 0) close(saved_);
      close(file_);
      throw std::runtime_error("StderrCapture: cannot redirect stderr");
    }
  }
  ~StderrCapture() {
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    close(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Everything written to stderr since the capture began.
  std::string Text() const {
    std::string text;
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = pread(file_, buf, sizeof buf, at);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    return text;
  }

  // True as soon as stderr holds `needle`; false if it did not within
  // `timeout`.
  bool WaitFor(const std::string& needle, std::chrono::milliseconds timeout = kWaitTimeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (Text().find(needle) != std::string::npos) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  int file_ = -1;   // the temporary file (unlinked), read with pread
  int saved_ = -1;  // the original fd 2, restored by the destructor
};

}  // namespace depengine::support
