#include "driver/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace depengine::bench::peers {
namespace {

constexpr const char kPrefix[] = "@peer ";

void WriteAll(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string ParseProtocolLine(const std::string& line, Fields* fields) {
  fields->clear();
  std::size_t pos = sizeof(kPrefix) - 1;
  std::size_t tab = line.find('\t', pos);
  const std::string kind = line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos);
  while (tab != std::string::npos) {
    const std::size_t start = tab + 1;
    tab = line.find('\t', start);
    const std::string item = line.substr(start, tab == std::string::npos ? std::string::npos : tab - start);
    const std::size_t eq = item.find('=');
    if (eq != std::string::npos) (*fields)[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return kind;
}

std::unique_ptr<PeerProcess> PeerProcess::Start(const std::vector<std::string>& argv, int log_fd,
                                                double timeout_s, std::string* error) {
  int in_pipe[2];
  int out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  if (log_fd >= 0) posix_spawn_file_actions_adddup2(&actions, log_fd, 2);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The driver ignores SIGPIPE (peers_main.cc); a peer gets the default
  // disposition back, as if started from a shell.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    *error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return nullptr;
  }
  std::unique_ptr<PeerProcess> p(new PeerProcess());
  p->pid_ = pid;
  p->to_child_ = in_pipe[1];
  p->from_child_ = out_pipe[0];
  p->log_fd_ = log_fd;

  std::string line;
  if (!p->ReadLine(timeout_s, &line, error)) return nullptr;
  Fields fields;
  const std::string kind = ParseProtocolLine(line, &fields);
  if (kind == "ready") {
    p->ready_ = true;
    p->info_ = fields;
  } else if (kind == "unsupported") {
    p->reason_ = fields["reason"];
  } else {
    *error = "unexpected first line from " + argv[0] + ": " + line;
    return nullptr;
  }
  return p;
}

PeerProcess::~PeerProcess() {
  if (pid_ > 0) {
    Resume();
    WriteAll(to_child_, "quit\n");
  }
  if (to_child_ >= 0) close(to_child_);
  if (pid_ > 0) {
    // Give it a few seconds to shut its runtime down, then kill it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      usleep(2000);
    }
  }
  if (from_child_ >= 0) close(from_child_);
}

void PeerProcess::Pause() {
  if (pid_ > 0 && !paused_) {
    kill(pid_, SIGSTOP);
    // Wait until it has stopped, so that the next measurement starts clean.
    int status = 0;
    if (waitpid(pid_, &status, WUNTRACED) == pid_ && !WIFSTOPPED(status)) {
      pid_ = -1;  // it died meanwhile; the next Run reports it
      return;
    }
    paused_ = true;
  }
}

void PeerProcess::Resume() {
  if (pid_ > 0 && paused_) {
    kill(pid_, SIGCONT);
    paused_ = false;
  }
}

void PeerProcess::Kill() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

bool PeerProcess::Run(double timeout_s, Fields* result, std::string* error) {
  if (pid_ <= 0) {
    *error = "the process is gone";
    return false;
  }
  Resume();
  WriteAll(to_child_, "run\n");
  std::string line;
  if (!ReadLine(timeout_s, &line, error)) {
    Kill();
    return false;
  }
  const std::string kind = ParseProtocolLine(line, result);
  if (kind != "result") {
    *error = "unexpected answer: " + line;
    Kill();
    return false;
  }
  return true;
}

bool PeerProcess::ReadLine(double timeout_s, std::string* line, std::string* error) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
  for (;;) {
    std::size_t nl;
    while ((nl = buffer_.find('\n')) != std::string::npos) {
      std::string l = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (l.rfind(kPrefix, 0) == 0) {
        *line = l;
        return true;
      }
      if (log_fd_ >= 0) WriteAll(log_fd_, "[stdout] " + l + "\n");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *error = "timed out";
      return false;
    }
    pollfd pfd{from_child_, POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) {
      *error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (r > 0) {
      char buf[4096];
      const ssize_t n = read(from_child_, buf, sizeof buf);
      if (n == 0) {
        int status = 0;
        if (waitpid(pid_, &status, 0) == pid_) pid_ = -1;
        *error = WIFSIGNALED(status) ? std::string("died of signal ") + strsignal(WTERMSIG(status))
                                     : "exited with status " + std::to_string(WEXITSTATUS(status));
        return false;
      }
      if (n > 0) buffer_.append(buf, static_cast<std::size_t>(n));
    }
  }
}

}  // namespace depengine::bench::peers
