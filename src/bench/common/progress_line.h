// The one progress line of every bench: a status line on stderr that rewrites itself, shown only
// when a person is watching (stderr is a terminal), so it never mixes into --json or a log.
#pragma once

#include <string>

namespace kvtier::bench {

class Progress {
 public:
  // `tag` starts every line, e.g. "[bench]".
  explicit Progress(std::string tag);
  void Show(const std::string& line);
  void Done();

 private:
  std::string tag_;
  bool tty_;
};

}  // namespace kvtier::bench
