// SHA-256 of files and buffers, for identifying weights files in logs and
// status output and for comparing outputs with recorded digests.
//
// Thread-safety: pure function; safe from any thread.
#ifndef VAED_DAEMON_MODELS_SHA256_H_
#define VAED_DAEMON_MODELS_SHA256_H_

#include <cstdint>
#include <span>
#include <string>

#include "vaed/status.h"

namespace vaed {

// Returns the SHA-256 (FIPS 180-4, computed with OpenSSL's EVP API) of the
// whole file at `path` as 64 lowercase hex digits, the same text
// `sha256sum` prints. Reads the file in chunks; the file must not change
// while it is read.
// Errors: open/read failures keep their errno (ErrnoStatus: kNotFound for a
// missing file, kIoError, ...); an OpenSSL failure is kInternal with
// OpenSSL's error text.
Result<std::string> Sha256File(const std::string& path);

// The same digest of an in-memory buffer. Errors: kInternal from OpenSSL.
Result<std::string> Sha256Bytes(std::span<const uint8_t> bytes);

}  // namespace vaed

#endif  // VAED_DAEMON_MODELS_SHA256_H_
