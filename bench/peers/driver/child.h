// One peer process as the driver sees it: started with pipes on its stdin
// and stdout (protocol in ../peer_server.h), its stderr appended to a log,
// stopped (SIGSTOP) whenever another engine is being measured, so that no
// runtime's idle threads spin on the cores another engine is timed on.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace depengine::bench::peers {

// The tab-separated key=value fields of one protocol line.
using Fields = std::map<std::string, std::string>;

class PeerProcess {
 public:
  // Starts `argv` (argv[0] is the executable's path) and waits up to
  // `timeout_s` for its "ready" or "unsupported" line. Returns nullptr with
  // *error set if it could not start or said neither. The process is left
  // running; call Pause() to stop it.
  static std::unique_ptr<PeerProcess> Start(const std::vector<std::string>& argv, int log_fd,
                                            double timeout_s, std::string* error);

  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  // Asks the process to quit and reaps it (SIGKILL after a few seconds).
  ~PeerProcess();

  // Whether it answered "ready" (else "unsupported", with reason()).
  bool ready() const { return ready_; }
  const std::string& reason() const { return reason_; }
  // The fields of its ready line: engine, runtime, detail, threads, ...
  const Fields& info() const { return info_; }

  // SIGSTOP / SIGCONT.
  void Pause();
  void Resume();

  // Requests one run and waits up to `timeout_s` for its result line. On a
  // timeout or a dead process returns false with *error set, and the process
  // is killed.
  bool Run(double timeout_s, Fields* result, std::string* error);

 private:
  PeerProcess() = default;
  // Reads the next protocol line ("@peer ..."); other output goes to the log.
  bool ReadLine(double timeout_s, std::string* line, std::string* error);
  void Kill();

  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  int log_fd_ = -1;
  bool paused_ = false;
  bool ready_ = false;
  std::string reason_;
  Fields info_;
  std::string buffer_;
};

// Splits "@peer kind\tk=v\tk=v" into kind and fields.
std::string ParseProtocolLine(const std::string& line, Fields* fields);

}  // namespace depengine::bench::peers
