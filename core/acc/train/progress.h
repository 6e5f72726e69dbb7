#pragma once
// A tqdm-like progress bar. On a terminal it redraws one line in place:
//   train  45%|#########           | 45/100 [00:12<00:15, 3.61 it/s, loss=3.2101]
// When the stream is not a terminal (logs, CI) it prints a plain line every `log_every` updates
// and at the end instead, so files do not fill with carriage returns.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace acc::train {

class ProgressBar {
 public:
  // total 0 means unknown (no percentage). log_every 0 picks about 20 lines per run.
  ProgressBar(int64_t total, std::string description, std::FILE* stream = stderr,
              int64_t log_every = 0);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t n = 1);
  // Starts the count at `done` (the steps a resumed run took before): shown, but not counted in
  // the rate or the time left.
  void resume_at(int64_t done);
  // Shown after the rate, e.g. "loss=3.2101 lr=3.0e-04"; drawn at the next update.
  void set_postfix(std::string postfix) { postfix_ = std::move(postfix); }
  // Prints a line above the bar (a validation result) without breaking it.
  void write(const std::string& line);
  // Draws the final state and ends the line (also done by the destructor).
  void close();

  int64_t count() const { return count_; }
  bool is_terminal() const { return tty_; }
  std::string render() const;  // the current line without terminal control characters

 private:
  void draw();

  int64_t total_, count_ = 0, initial_ = 0, log_every_;
  std::string description_, postfix_;
  std::FILE* stream_;
  bool tty_, closed_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace acc::train

namespace acc {

// for (auto& batch : acc::progress(loader)) ...: iterates `range` (anything with begin/end and
// size()) while advancing a bar on stderr.
template <class Range>
class Progress {
 public:
  Progress(Range& range, std::string description)
      : range_(range), bar_(static_cast<int64_t>(range.size()), std::move(description)) {}

  class Iterator {
   public:
    using Inner = decltype(std::declval<Range&>().begin());
    Iterator(Inner it, train::ProgressBar* bar) : it_(std::move(it)), bar_(bar) {}
    decltype(auto) operator*() const { return *it_; }
    Iterator& operator++() {
      ++it_;
      bar_->update();
      return *this;
    }
    template <class End>
    bool operator==(const End& end) const { return it_ == end; }

   private:
    Inner it_;
    train::ProgressBar* bar_;
  };

  Iterator begin() { return Iterator(range_.begin(), &bar_); }
  auto end() { return range_.end(); }
  train::ProgressBar& bar() { return bar_; }

 private:
  Range& range_;
  train::ProgressBar bar_;
};

template <class Range>
Progress<Range> progress(Range& range, std::string description = "") {
  return Progress<Range>(range, std::move(description));
}

}  // namespace acc
