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

/* Unregisters a region registered with vaed_register_region or
 * vaed_register_cuda_region (vaed::client::Client::UnregisterRegion): 0
 * means the daemon will never read or write the region again (it waits for
 * decodes still using it), so its memory may be freed or reused. 0 also for
 * a region the daemon no longer has. */
VAED_C_API vaed_status vaed_unregister_region(vaed_client* client, uint64_t region_id, char* err,
                                              size_t err_len) VAED_C_NOEXCEPT;

/* A registered CUDA allocation (vaed::client::CudaRegion). Units: bytes. */
typedef struct {
  uint64_t region_id;    /* vaed_tensor.region_id of tensors in the allocation */
  uint64_t offset_bytes; /* where the registered pointer lies: its vaed_tensor.offset */
  uint64_t size_bytes;   /* the whole allocation */
  char device_uuid[48];  /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", NUL-terminated */
} vaed_cuda_region;

/* Registers the CUDA allocation holding the `bytes` bytes of device memory
 * at `device_ptr` (vaed::client::Client::RegisterCudaRegion): the library
 * exports its IPC handle itself, loading the CUDA driver at run time
 * (dlopen("libcuda.so.1"); nothing of CUDA is linked). Returns 5 (failed
 * precondition) "register_cuda_region: this daemon has no CUDA ranks ..."
 * at once, without loading the driver, when the daemon decodes on CPU
 * only; 5 "libcuda.so.1 could not be loaded (...): this machine has no
 * NVIDIA driver"; 1 for NULL arguments, 0 bytes, memory that is not
 * device memory or that legacy CUDA IPC cannot share; the driver's errors
 * with their CUDA name and code. Lifetime: the memory is the caller's and
 * must stay allocated until vaed_unregister_region of *out's region_id
 * returned 0 (or the client was freed). Unrun on a GPU. */
VAED_C_API vaed_status vaed_register_cuda_region(vaed_client* client, const void* device_ptr,
                                                 uint64_t bytes, vaed_cuda_region* out, char* err,
                                                 size_t err_len) VAED_C_NOEXCEPT;

/* vaed_decode with the caller's CUDA stream (a CUstream / cudaStream_t;
 * NULL = the legacy default stream), for latents and outputs in CUDA
 * regions: the daemon waits on the device for the work enqueued on
 * `cuda_stream` before reading CUDA latents, and on return `cuda_stream`
 * waits (on the device, not the host) for the daemon's writes of CUDA
 * outputs (vaed::client::DecodeRequest::cuda_stream). Host-only requests
 * behave as vaed_decode. Unrun on a GPU. */
VAED_C_API vaed_status vaed_decode_on_stream(vaed_client* client, const char* model,
                                             const vaed_tensor* latent, const vaed_tensor* output,
                                             int32_t output_format, void* cuda_stream,
                                             vaed_decode_result* result, char* err,
                                             size_t err_len) VAED_C_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* VAED_VAED_C_H_ */
