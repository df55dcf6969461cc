// Reading a whole (small) file, for the model config loaders.
//
// Thread-safety: pure function.
#ifndef VAED_DAEMON_MODELS_READ_FILE_H_
#define VAED_DAEMON_MODELS_READ_FILE_H_

#include <cerrno>
#include <cstdio>
#include <string>

#include "vaed/status.h"

namespace vaed::models {

// The bytes of the file at `path`. Errors keep errno (ErrnoStatus:
// kNotFound for a missing file, kIoError, ...) and their message starts
// with `path`.
inline Result<std::string> ReadFileToString(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return ErrnoStatus(errno, path);
  std::string data;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) data.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return ErrnoStatus(err, path);
  return data;
}

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_READ_FILE_H_
