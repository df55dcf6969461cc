#include "daemon/models/sha256.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

namespace vaed {
namespace {

// The one place OpenSSL errors become a Status: "<context>: <OpenSSL text>".
Status OpenSslStatus(const std::string& context) {
  std::string m = context;
  const unsigned long err = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  if (err != 0) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof(buf));
    m += ": ";
    m += buf;
  }
  ERR_clear_error();
  return Internal(std::move(m));
}

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const noexcept { EVP_MD_CTX_free(ctx); }
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Hex(const unsigned char* digest, unsigned int digest_len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest_len);
  for (unsigned int i = 0; i < digest_len; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

}  // namespace

Result<std::string> Sha256File(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "sha256: open " + path);

  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  if (ctx == nullptr) return OpenSslStatus("sha256 " + path + ": EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return OpenSslStatus("sha256 " + path + ": EVP_DigestInit_ex");
  }

  std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "sha256: read " + path);
    }
    if (n == 0) break;
    if (EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n)) != 1) {
      return OpenSslStatus("sha256 " + path + ": EVP_DigestUpdate");
    }
  }

  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &digest_len) != 1) {
    return OpenSslStatus("sha256 " + path + ": EVP_DigestFinal_ex");
  }

  return Hex(digest, digest_len);
}

Result<std::string> Sha256Bytes(std::span<const uint8_t> bytes) {
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  if (ctx == nullptr) return OpenSslStatus("sha256: EVP_MD_CTX_new");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &digest_len) != 1) {
    return OpenSslStatus("sha256 of " + std::to_string(bytes.size()) + " bytes");
  }
  return Hex(digest, digest_len);
}

}  // namespace vaed
