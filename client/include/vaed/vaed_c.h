/* vaed C ABI: a stable C interface over the C++ client library for other
 * languages (Python ctypes/cffi, Rust, Go). Only the symbols declared here
 * are exported from libvaed_client.
 *
 * Conventions:
 * - Functions return a vaed_status: 0 on success, otherwise a code equal to
 *   vaed::StatusCode / vaed.v1.ErrorCode (e.g. 1 invalid argument, 7 daemon
 *   unavailable, 8 protocol version mismatch).
 * - On failure, the message is copied into `err` (NUL-terminated, truncated
 *   to `err_len`) when `err` is not NULL.
 * - Handles are owned by the caller and released with the matching _free.
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
  int32_t warm;         /* 0 = first decode of this shape bucket */
  int32_t demo_weights; /* 1 = the daemon's seeded demo model, not real output */
  int32_t num_timings;
  vaed_timing timings[VAED_MAX_TIMINGS];
} vaed_decode_result;

/* Connects and says Hello. `socket` NULL = "/run/vaed/vaed.sock". */
VAED_C_API vaed_status vaed_connect(const char* socket, const char* client_name,
                                    vaed_client** out, char* err, size_t err_len);
VAED_C_API void vaed_client_free(vaed_client* client);

/* Creates a zero-filled POSIX shm segment of `bytes` bytes owned by the
 * caller (unlinked by vaed_region_free). */
VAED_C_API vaed_status vaed_region_create(uint64_t bytes, vaed_region** out, char* err,
                                          size_t err_len);
VAED_C_API void* vaed_region_data(vaed_region* region);
VAED_C_API uint64_t vaed_region_size(const vaed_region* region);
VAED_C_API void vaed_region_free(vaed_region* region);

VAED_C_API vaed_status vaed_register_region(vaed_client* client, const vaed_region* region,
                                            uint64_t* region_id, char* err, size_t err_len);

/* Fills result->output_* for a latent without decoding (to size buffers).
 * `model` NULL or "" = the daemon's default model. */
VAED_C_API vaed_status vaed_plan_decode(vaed_client* client, const char* model,
                                        const vaed_tensor* latent, int32_t output_format,
                                        vaed_decode_result* result, char* err, size_t err_len);

/* Decodes `latent` into `output` (both in this client's registered regions). */
VAED_C_API vaed_status vaed_decode(vaed_client* client, const char* model,
                                   const vaed_tensor* latent, const vaed_tensor* output,
                                   int32_t output_format, vaed_decode_result* result, char* err,
                                   size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* VAED_VAED_C_H_ */
