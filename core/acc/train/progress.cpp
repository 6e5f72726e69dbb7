#include "acc/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace acc::train {

namespace {

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

constexpr int kBarWidth = 24;

}  // namespace

ProgressBar::ProgressBar(int64_t total, std::string description, std::FILE* stream,
                         int64_t log_every)
    : total_(std::max<int64_t>(total, 0)),
      log_every_(log_every > 0 ? log_every : std::max<int64_t>(1, total / 20)),
      description_(std::move(description)),
      stream_(stream),
      tty_(isatty(fileno(stream)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (tty_) draw();
}

ProgressBar::~ProgressBar() { close(); }

std::string ProgressBar::render() const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(count_ - initial_) / elapsed : 0.0;
  std::string line = description_.empty() ? "" : description_ + " ";
  char buf[96];
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(count_) / static_cast<double>(total_));
    const int filled = static_cast<int>(frac * kBarWidth);
    std::snprintf(buf, sizeof buf, "%3d%%|", static_cast<int>(frac * 100));
    line += buf + std::string(static_cast<size_t>(filled), '#') +
            std::string(static_cast<size_t>(kBarWidth - filled), ' ') + "| ";
    std::snprintf(buf, sizeof buf, "%lld/%lld ", static_cast<long long>(count_),
                  static_cast<long long>(total_));
  } else {
    std::snprintf(buf, sizeof buf, "%lld ", static_cast<long long>(count_));
  }
  line += buf;
  const double remaining = rate > 0 && total_ > 0 ? static_cast<double>(total_ - count_) / rate : NAN;
  std::snprintf(buf, sizeof buf, "[%s<%s, %.2f it/s", clock_text(elapsed).c_str(),
                clock_text(remaining).c_str(), rate);
  line += buf;
  if (!postfix_.empty()) line += ", " + postfix_;
  return line + "]";
}

void ProgressBar::draw() {
  // \33[K clears what a longer previous line left behind.
  std::fprintf(stream_, "\r%s\33[K", render().c_str());
  std::fflush(stream_);
  last_draw_ = std::chrono::steady_clock::now();
}

void ProgressBar::update(int64_t n) {
  count_ += n;
  if (tty_) {
    // Redraw at most ~10 times a second: drawing costs more than a fast step.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ > std::chrono::milliseconds(100) || count_ == total_) draw();
  } else if (count_ % log_every_ == 0 || count_ == total_) {
    std::fprintf(stream_, "%s\n", render().c_str());
    std::fflush(stream_);
  }
}

void ProgressBar::resume_at(int64_t done) {
  count_ = initial_ = done;
  start_ = std::chrono::steady_clock::now();
  if (tty_) draw();
}

void ProgressBar::write(const std::string& line) {
  if (tty_) std::fprintf(stream_, "\r\33[K");
  std::fprintf(stream_, "%s\n", line.c_str());
  if (tty_ && !closed_) draw();
  std::fflush(stream_);
}

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  if (tty_) {
    draw();
    std::fprintf(stream_, "\n");
  } else if (count_ % log_every_ != 0 && count_ != total_) {
    std::fprintf(stream_, "%s\n", render().c_str());
  }
  std::fflush(stream_);
}

}  // namespace acc::train
