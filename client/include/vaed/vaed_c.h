/* vaed C ABI: a stable C interface over the C++ client library for other
 * languages (Python ctypes/cffi, Rust, Go). libvaed_client exports these
 * functions and the C++ API of vaed/client.h, and nothing else (the build
 * hides everything else; tests/client/check_exported_symbols.sh checks it).
 *
 * Conventions:
 * - Functions return a vaed_status: 0 on success, otherwise a code equal to
 *   vaed::StatusCode / vaed.v1.ErrorCode (e.g. 1 invalid argument, 7 daemon
 *   unavailable, 8 protocol version mismatch).
 * - On failure, the message ("<code name>: <what went wrong>") is copied
 *   into `err` (NUL-terminated, truncated to `err_len`) when `err` is not
 *   NULL.
 * - No C++ exception leaves these functions (in C++ they are noexcept). A
 *   failure inside the library is reported like any other: 6 (resource
 *   exhausted: out of memory) or 11 (internal: an unexpected exception,
 *   with its message), and the client stays usable (a connection that was
 *   mid-request is replaced on the next call).
 * - Handles are owned by the caller and released with the matching _free
 *   (NULL is accepted and ignored).
 * - Thread-safety: a vaed_client may be used from several threads (calls are
 *   serialized); a vaed_region is not synchronized.
 */
#ifndef VAED_VAED_C_H_
#define VAED_VAED_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VAED_C_API __attribute__((visibility("default")))
#else
#define VAED_C_API
#endif

#ifdef __cplusplus
#define VAED_C_NOEXCEPT noexcept
#else
#define VAED_C_NOEXCEPT
#endif

typedef int32_t vaed_status;
typedef struct vaed_client vaed_client;
typedef struct vaed_region vaed_region;

/* Element types (= vaed.v1.DType). */
enum { VAED_DTYPE_FLOAT32 = 1, VAED_DTYPE_FLOAT16 = 2, VAED_DTYPE_BFLOAT16 = 3, VAED_DTYPE_UINT8 = 4 };
/* Output layouts (= vaed.v1.OutputFormat). */
enum {
  VAED_OUTPUT_UINT8_NHWC = 1,
  VAED_OUTPUT_FLOAT32_NCHW = 2,     /* raw decoder output */
  VAED_OUTPUT_FLOAT32_NCHW_UNIT = 3 /* RGB in [0, 1] after the model's post-processing */
};

#define VAED_MAX_DIMS 8
#define VAED_MAX_TIMINGS 16

/* A tensor inside a registered region: byte offset, element type, shape
 * (elements, C-contiguous). */
typedef struct {
  uint64_t region_id;
  uint64_t offset;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[VAED_MAX_DIMS];
} vaed_tensor;

typedef struct {
  char component[48]; /* e.g. "decode", "taef2.decode_latent" */
  double seconds;
} vaed_timing;

typedef struct {
  int32_t output_ndim;
  int64_t output_shape[VAED_MAX_DIMS];
  int32_t output_dtype;
  uint64_t output_bytes;
  uint32_t frames, height_px, width_px;
  int32_t warm;         /* 0 = first decode of this shape bucket on a rank that ran it
                           (the start-up warm-up of warm_shapes counts) */
  int32_t demo_weights; /* 1 = the daemon's seeded demo model, not real output */
  int32_t num_timings;
  vaed_timing timings[VAED_MAX_TIMINGS];
} vaed_decode_result;

/* Connects and says Hello (vaed::client::Client::Connect with default
 * options: 3 s to connect, 600 s per request, heartbeats, reconnecting for
 * up to 30 s). `socket` NULL or "" = "/run/vaed/vaed.sock"; `client_name`
 * NULL or "" = "vaed-client". On success *out is a new client (release it
 * with vaed_client_free: says Goodbye). */
VAED_C_API vaed_status vaed_connect(const char* socket, const char* client_name,
                                    vaed_client** out, char* err,
                                    size_t err_len) VAED_C_NOEXCEPT;
VAED_C_API void vaed_client_free(vaed_client* client) VAED_C_NOEXCEPT;

/* Creates a zero-filled POSIX shm segment of `bytes` bytes owned by the
 * caller (unlinked and unmapped by vaed_region_free). vaed_region_data is
 * its first byte (NULL for a NULL region), vaed_region_size its size in
 * bytes (0 for NULL). */
VAED_C_API vaed_status vaed_region_create(uint64_t bytes, vaed_region** out, char* err,
                                          size_t err_len) VAED_C_NOEXCEPT;
VAED_C_API void* vaed_region_data(vaed_region* region) VAED_C_NOEXCEPT;
VAED_C_API uint64_t vaed_region_size(const vaed_region* region) VAED_C_NOEXCEPT;
VAED_C_API void vaed_region_free(vaed_region* region) VAED_C_NOEXCEPT;

/* Registers `region` with the daemon; *region_id names it in tensors. The
 * region must outlive the client's use of it. */
VAED_C_API vaed_status vaed_register_region(vaed_client* client, const vaed_region* region,
                                            uint64_t* region_id, char* err,
                                            size_t err_len) VAED_C_NOEXCEPT;

/* Fills result->output_* for a latent without decoding (to size buffers).
 * `model` NULL or "" = the daemon's default model. */
VAED_C_API vaed_status vaed_plan_decode(vaed_client* client, const char* model,
                                        const vaed_tensor* latent, int32_t output_format,
                                        vaed_decode_result* result, char* err,
                                        size_t err_len) VAED_C_NOEXCEPT;

/* Decodes `latent` into `output` (both in this client's registered regions);
 * `result` (may be NULL) gets the output shape, sizes and timings (at most
 * VAED_MAX_TIMINGS; component names truncated to 47 characters). */
VAED_C_API vaed_status vaed_decode(vaed_client* client, const char* model,
                                   const vaed_tensor* latent, const vaed_tensor* output,
                                   int32_t output_format, vaed_decode_result* result, char* err,
                                   size_t err_len) VAED_C_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* VAED_VAED_C_H_ */
