/* vaed C ABI: a stable C interface over the C++ client library for other
 * languages (Python ctypes/cffi, Rust, Go). libvaed_client exports these
 * functions and the C++ API of vaed/client.h, and nothing else (the build
 * hides everything else; tests/client/check_exported_symbols.sh checks it).
 *
 * Stability: the library's SONAME is libvaed_client.so.0; within it, no
 * function declared here changes its signature or meaning, no struct
 * declared here changes the layout of its existing fields, and new
 * capabilities come as new functions or as fields appended to the end of a
 * struct that carries its own size (below). Link with -lvaed_client; the
 * version script client/src/libvaed_client.map exports exactly these
 * functions (VAED_C_API) and the C++ API.
 *
 * Growing structs (vaed_request, vaed_reply, vaed_progress,
 * vaed_final_range): the first member is `uint32_t struct_size`, the size
 * of the struct as the CALLER compiled it. Initialise every one with its
 * macro (VAED_REQUEST_INIT, VAED_REPLY_INIT) or init function (vaed_request_init, vaed_reply_init):
 * they zero it and set struct_size = sizeof as your header declares it.
 * Every field's zero value means "the default". The library then:
 *   - reads only the fields that fit in struct_size (a caller built against
 *     an older header gets the defaults of fields added later);
 *   - refuses, with 1 (invalid argument) "<name>->struct_size is N; must be
 *     at least M ...", a struct_size below the first published size
 *     (uninitialised structs are caught here, most of the time);
 *   - for a request larger than it knows (a caller built against a newer
 *     header, running on an older library), requires the bytes it does not
 *     know to be zero: otherwise 1 "<name> sets fields this library
 *     version does not know ..." rather than silently ignoring an option;
 *   - writes a reply only within struct_size (bytes it does not know are
 *     zeroed), keeping struct_size as the caller set it;
 *   - passes a vaed_progress or vaed_final_range to callbacks with
 *     struct_size set to the library's size: read only the fields that fit.
 * vaed_tensor, vaed_decode_result, vaed_timing and vaed_cuda_region are
 * frozen: they never change (they carry no size).
 *
 * Conventions:
 * - Functions return a vaed_status: 0 on success, otherwise a code equal to
 *   vaed::StatusCode / vaed.v1.ErrorCode (VAED_STATUS_* below;
 *   vaed_status_name gives its name).
 * - On failure, the message ("<code name>: <what went wrong>") is copied
 *   into `err` (NUL-terminated, truncated to `err_len`) when `err` is not
 *   NULL and err_len > 0; on success `err` is left untouched. A message for
 *   a bad argument names it ("client is NULL", "request->latent.ndim is
 *   9; ...", "reply->struct_size is 0; ...").
 * - Outputs (*out, *region_id, result, reply) are written only on success.
 * - No C++ exception leaves these functions (in C++ they are noexcept). A
 *   failure inside the library is reported like any other: 6 (resource
 *   exhausted: out of memory) or 11 (internal: an unexpected exception,
 *   with its message), and the client stays usable (a connection that was
 *   mid-request is replaced on the next call).
 * - Handles are owned by the caller and released with the matching _free
 *   (NULL is accepted and ignored). Pointers passed in (strings, tensors,
 *   requests) are read during the call only; nothing keeps them.
 * - Strings are UTF-8, NUL-terminated; strings the library writes into
 *   fixed-size char arrays are truncated to fit and always NUL-terminated.
 * - Units: shapes in elements, offsets and sizes in bytes; video frames,
 *   heights and widths in pixels; latent shapes in latent cells (H3 video
 *   [1, 24, T, h, w]: 16 h x 16 w pixels, and a frame count the plan
 *   gives: 7 latent frames -> 22 frames); audio outputs in samples per
 *   channel, audio latents in latent frames (H3 [channels, 32, T]: 800
 *   samples each at 32000 Hz); times in seconds unless the name says _ms.
 * - Thread-safety: a vaed_client may be used from several threads (calls are
 *   serialized on its one connection; progress and final_range callbacks
 *   run while that lock is held); a vaed_region is not synchronized (do not
 *   write a region while a decode that reads it is in flight).
 *   vaed_status_name is thread-safe. A vaed_client belongs to the process that connected it:
 *   after fork() every call in the child fails with 5.
 * - Errors common to every call that talks to the daemon: 7 (unavailable:
 *   daemon not running, no answer in time, or not reachable again within
 *   30 s of reconnecting; the message names the socket), 8 (version
 *   mismatch), 15 (quarantined), 16 (busy), 17 (permission denied), 6 / 11
 *   (failures inside the library), and the daemon's refusals of a request
 *   (1 invalid argument naming the field, e.g. "latent.shape[1]"; 2 unknown
 *   model or region; 4 a tensor outside its region; 5 failed precondition;
 *   10 client fault: the daemon faulted reading or writing a region; 13
 *   deadline exceeded).
 */
#ifndef VAED_VAED_C_H_
#define VAED_VAED_C_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* Status codes (= vaed::StatusCode, vaed.v1.ErrorCode). */
enum {
  VAED_STATUS_OK = 0,
  VAED_STATUS_INVALID_ARGUMENT = 1, /* a bad argument or request field (named) */
  VAED_STATUS_NOT_FOUND = 2,        /* unknown region, model, client */
  VAED_STATUS_ALREADY_EXISTS = 3,
  VAED_STATUS_OUT_OF_RANGE = 4,        /* a tensor outside its region */
  VAED_STATUS_FAILED_PRECONDITION = 5, /* e.g. no CUDA ranks; a forked child's client */
  VAED_STATUS_RESOURCE_EXHAUSTED = 6,  /* out of memory (here or in the daemon), quota */
  VAED_STATUS_UNAVAILABLE = 7,         /* daemon down or not answering */
  VAED_STATUS_VERSION_MISMATCH = 8,    /* client and daemon protocol versions differ */
  VAED_STATUS_PROTOCOL_ERROR = 9,
  VAED_STATUS_CLIENT_FAULT = 10,      /* a region's memory faulted in the daemon */
  VAED_STATUS_INTERNAL = 11,          /* a bug or an unexpected exception */
  VAED_STATUS_CANCELLED = 12,         /* daemon shutting down */
  VAED_STATUS_DEADLINE_EXCEEDED = 13, /* vaed_request.deadline_ms passed */
  VAED_STATUS_IO_ERROR = 14,
  VAED_STATUS_QUARANTINED = 15, /* the daemon quarantined this client */
  VAED_STATUS_BUSY = 16,        /* the daemon is at capacity; retry later */
  VAED_STATUS_PERMISSION_DENIED = 17,
  VAED_STATUS_UNKNOWN_CLIENT = 18 /* handled inside the library (reconnect) */
};

/* Element types (= vaed.v1.DType). */
enum {
  VAED_DTYPE_FLOAT32 = 1,
  VAED_DTYPE_FLOAT16 = 2,
  VAED_DTYPE_BFLOAT16 = 3,
  VAED_DTYPE_UINT8 = 4
};
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
 * up to 30 s). `socket` NULL or "" = $VAED_SOCKET when set and non-empty,
 * else "/run/vaed/vaed.sock" (the rule of every client); `client_name` NULL
 * or "" = "vaed-client". On success *out is a new client (release it
 * with vaed_client_free: stops its heartbeat thread and says Goodbye, at
 * most 0.5 s; it must not be in use by another thread). Errors: 1 out
 * NULL; 7 no socket file, no connection or no Hello reply within 3 s (the
 * message names the socket); 8; 15; 17; 6 / 11. *out is untouched on
 * failure. */
VAED_C_API vaed_status vaed_connect(const char* socket, const char* client_name, vaed_client** out,
                                    char* err, size_t err_len) VAED_C_NOEXCEPT;
VAED_C_API void vaed_client_free(vaed_client* client) VAED_C_NOEXCEPT;

/* Creates a zero-filled POSIX shm segment of `bytes` bytes owned by the
 * caller (unlinked and unmapped by vaed_region_free). vaed_region_data is
 * its first byte (NULL for a NULL region), vaed_region_size its size in
 * bytes (0 for NULL). The data pointer stays valid until vaed_region_free.
 * Errors: 1 out NULL or bytes 0; 6 / 14 the segment could not be created or
 * mapped (the message says why). Free a region only once no decode uses it
 * (vaed_unregister_region returned 0, or the client was freed). */
VAED_C_API vaed_status vaed_region_create(uint64_t bytes, vaed_region** out, char* err,
                                          size_t err_len) VAED_C_NOEXCEPT;
VAED_C_API void* vaed_region_data(vaed_region* region) VAED_C_NOEXCEPT;
VAED_C_API uint64_t vaed_region_size(const vaed_region* region) VAED_C_NOEXCEPT;
VAED_C_API void vaed_region_free(vaed_region* region) VAED_C_NOEXCEPT;

/* Registers `region` with the daemon; *region_id names it in tensors
 * (vaed_tensor.region_id) and survives reconnects. The region must outlive
 * the client's use of it. Errors: 1 client, region or region_id NULL
 * (named); 5 an empty region; the daemon's 2 (no such segment), 4 (larger
 * than the segment), 6; the common errors. */
VAED_C_API vaed_status vaed_register_region(vaed_client* client, const vaed_region* region,
                                            uint64_t* region_id, char* err,
                                            size_t err_len) VAED_C_NOEXCEPT;

/* Video only, no options (the first C ABI; kept as it was): fills
 * *result (output_*, frames, height_px, width_px) for a latent without
 * decoding, to size buffers. `model` NULL or "" = the daemon's default
 * model. For audio, A/V and options use vaed_plan_decode_ex. Errors: 1
 * client / latent NULL or latent->ndim outside 1..VAED_MAX_DIMS (named),
 * the daemon's refusal (1 naming the field, e.g. "latent.shape[1]"; 2
 * unknown model), the common errors. */
VAED_C_API vaed_status vaed_plan_decode(vaed_client* client, const char* model,
                                        const vaed_tensor* latent, int32_t output_format,
                                        vaed_decode_result* result, char* err,
                                        size_t err_len) VAED_C_NOEXCEPT;

/* Video only, default options (the first C ABI; kept as it was): decodes
 * `latent` into `output` (both in this client's registered regions);
 * `result` (may be NULL) gets the output shape, sizes and timings (at most
 * VAED_MAX_TIMINGS; component names truncated to 47 characters). For
 * audio, A/V, options and progress use vaed_decode_ex. Errors: as
 * vaed_plan_decode, and 1 output NULL or its ndim out of range, the
 * daemon's refusal of the output (1 "output.shape ...", 4 outside its
 * region), 10, 13. */
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
 * `cuda_stream` before reading CUDA latents or writing CUDA outputs, and
 * on return `cuda_stream`
 * waits (on the device, not the host) for the daemon's writes of CUDA
 * outputs (vaed::client::DecodeRequest::cuda_stream). Host-only requests
 * behave as vaed_decode. Unrun on a GPU. */
VAED_C_API vaed_status vaed_decode_on_stream(vaed_client* client, const char* model,
                                             const vaed_tensor* latent, const vaed_tensor* output,
                                             int32_t output_format, void* cuda_stream,
                                             vaed_decode_result* result, char* err,
                                             size_t err_len) VAED_C_NOEXCEPT;

/* ---- Decode with every option, video and/or audio (growing structs) ---- */

/* The lower_snake name of a status code ("ok", "invalid_argument", ...;
 * "unknown" for a code this library does not know). A static string: never
 * freed. Thread-safe. */
VAED_C_API const char* vaed_status_name(vaed_status status) VAED_C_NOEXCEPT;

/* Tile scheduling of tiled models (= vaed::client::StackTiling). Output
 * bytes do not depend on it; a model without stacked tiles refuses ON. */
enum {
  VAED_STACK_TILING_DEFAULT = 0, /* the model's configured default */
  VAED_STACK_TILING_OFF = 1,
  VAED_STACK_TILING_ON = 2,
  VAED_STACK_TILING_AUTO = 3 /* the model decides; vaed_reply.stack_decision says why */
};
/* Compiled plans (= vaed::client::Compile). Output bytes do not depend on
 * it; a model without compiled plans refuses ON. */
enum {
  VAED_COMPILE_DEFAULT = 0, /* the profile decides (safe: off) */
  VAED_COMPILE_OFF = 1,
  VAED_COMPILE_ON = 2,
  VAED_COMPILE_AUTO = 3 /* compiled where possible; vaed_reply.compile_decision says which */
};

/* Which space the latents are in (= vaed::client::LatentSpace), video and
 * audio alike; 0 = normalized. DENORMALIZED: already latent * std + mean
 * (what diffusers' AutoencoderKLMiniMaxH3*.decode takes): the daemon skips its de-normalisation
 * (same bytes as NORMALIZED for the latent it came from); a model without
 * latent normalisation refuses it. */
enum {
  VAED_LATENT_SPACE_DEFAULT = 0, /* = NORMALIZED */
  VAED_LATENT_SPACE_NORMALIZED = 1,
  VAED_LATENT_SPACE_DENORMALIZED = 2
};

/* One progress event of a decode (= vaed.v1.Progress). struct_size is the
 * library's sizeof(vaed_progress): fields past it are absent (read them
 * only when offsetof(vaed_progress, field) + sizeof(field) <= struct_size). */
typedef struct vaed_progress {
  uint32_t struct_size;
  uint32_t done;       /* units of the stage finished */
  uint32_t total;      /* units of the stage (> 0) */
  uint32_t tiles_done; /* tiled video: tiles decoded so far */
  uint32_t tiles_total;
  char stage[16];         /* "video" or "audio" */
  char unit[16];          /* "window" (temporal windows), "frames", "audio" */
  double fraction;        /* of the whole request, in [0, 1]; 1 = all done */
  double elapsed_seconds; /* since the decode started (queue wait excluded) */
  double eta_seconds;     /* estimated remaining seconds; 0 once done */
} vaed_progress;

/* A progress callback: called for each event, in order, on the thread that
 * called vaed_decode_ex, before it returns; the last event has fraction 1
 * (unless the decode failed). `progress` is valid only during the call
 * (copy what you keep); `user_data` is vaed_request.progress_user_data. It
 * runs while the client's lock is held: it must not call any vaed_*
 * function with the same client, and should return quickly (the daemon's
 * heartbeat answers wait behind it). It must not unwind (longjmp, C++
 * exceptions, Rust panics) out of itself; a C++ exception that does is
 * caught and returned as 11 (internal) once the decode is over. A decode
 * retried after a reconnect reports its progress again from the start. */
typedef void (*vaed_progress_fn)(const vaed_progress* progress, void* user_data);

/* A part of a streamed decode's output that is final (= vaed.v1.FinalRange;
 * vaed_request.final_range). struct_size is the library's
 * sizeof(vaed_final_range): fields past it are absent (read them only when
 * offsetof(vaed_final_range, field) + sizeof(field) <= struct_size).
 * Per stage the ranges come in order and are contiguous: the first begins
 * at 0, each begins where the previous one ended, the last ends at
 * `total`. */
typedef struct vaed_final_range {
  uint32_t struct_size;
  /* "video": pixel frames of vaed_request.output (its outermost dimension:
   * frame f is the bytes [f * frame_bytes, (f + 1) * frame_bytes) of the
   * tensor); "audio": samples per channel of vaed_request.audio_output
   * [channels, samples] (planar: the range in each channel's row). */
  const char* stage;
  const char* unit; /* "frames" (video) or "samples" (audio) */
  uint64_t begin;   /* half-open [begin, end), in `unit` */
  uint64_t end;
  uint64_t total; /* frames or samples per channel of the whole output */
} vaed_final_range;

/* A streamed-output callback (vaed_request.final_range): called for each
 * part of the output that became final, in order, on the thread that
 * called vaed_decode_ex, before it returns (H3 video: after each temporal
 * window, pixel frames [0, 17(k+1)) final after window k; TAEF2 and the
 * demo model: after each frame batch; audio: once, when written). From the
 * call on, the range's bytes are the caller's: the daemon has written them
 * and this request never writes them again, whatever happens to the rest
 * of it, so the callback (or another thread it hands them to) may read,
 * encode or overwrite them. The bytes are the same as without streaming.
 * CUDA outputs: before the call the library makes vaed_request.cuda_stream
 * wait (on the device) for the daemon's writes of the range, so work
 * enqueued on that stream from the callback on sees them; synchronise the
 * stream before the host reads them. `range` and its strings are valid
 * only during the call (copy what you keep); `user_data` is
 * vaed_request.final_range_user_data. Locking, reentrancy and unwinding as
 * vaed_progress_fn: it runs while the client's lock is held, must not call
 * any vaed_* function with the same client and must not unwind.
 *
 * A failed or cancelled decode (deadline, daemon shutting down) returns its
 * error after the ranges it announced; those stay valid and the rest of the
 * outputs holds unspecified bytes: the last range delivered per stage says
 * where the final part ends (the C ABI has no other error details). A
 * streamed decode that delivered a range is not retried after a reconnect
 * (that would write the delivered frames again): it fails at once with 7
 * (the next call reconnects). */
typedef void (*vaed_final_range_fn)(const vaed_final_range* range, void* user_data);

/* A decode request (= vaed::client::DecodeRequest). Initialise with
 * VAED_REQUEST_INIT or vaed_request_init (all fields zero = defaults).
 * Tensors are passed by pointer and read during the call only; NULL = not
 * sent. A request decodes a video latent (latent + output), an audio latent
 * (audio_latent + audio_output), or both, as the model allows (its
 * capabilities "video", "audio"). Every tensor lies in a region this client
 * registered (vaed_register_region / vaed_register_cuda_region); outputs
 * must have the dtype and shape the plan gives (vaed_plan_decode_ex). */
typedef struct vaed_request {
  uint32_t struct_size;  /* sizeof(vaed_request): VAED_REQUEST_INIT */
  int32_t output_format; /* VAED_OUTPUT_*; 0 = VAED_OUTPUT_UINT8_NHWC */
  const char* model;     /* NULL or "" = the daemon's default model */
  /* Video/image latent in the model's layout (latent cells), e.g. H3
   * float32 [1, 24, T, h, w]; NULL = audio-only. */
  const vaed_tensor* latent;
  /* Frames: uint8 [frames, height_px, width_px, 3] (UINT8_NHWC) or float32
   * [frames, 3, height_px, width_px]; pixels. Required with `latent` for
   * vaed_decode_ex, ignored by vaed_plan_decode_ex. */
  const vaed_tensor* output;
  /* Audio latent (models with the "audio" capability): H3 float32
   * [channels (1 mono, 2 stereo L,R), 32, T] at 40 latent frames per
   * second; NULL = video-only. */
  const vaed_tensor* audio_latent;
  /* float32 [channels, samples] planar (H3: samples = 800 * T at 32000
   * Hz). Required with `audio_latent` for vaed_decode_ex, ignored by
   * vaed_plan_decode_ex. */
  const vaed_tensor* audio_output;
  /* Decode profile: NULL or "" = the daemon's default; "safe", "optimized",
   * "diagnostic" or "student" within what the daemon allows. */
  const char* profile;
  int32_t stack_tiling; /* VAED_STACK_TILING_*; 0 = default */
  int32_t compile;      /* VAED_COMPILE_*; 0 = default */
  /* Ranks of the daemon's VAE group that decode the video tile-parallel:
   * 0 = the daemon's group.size, otherwise one of its qualified sizes. */
  uint32_t group_size;
  /* Milliseconds from when the daemon receives the request, queue time
   * included; 0 = none. Past it: 13 (deadline exceeded); a running decode
   * is cancelled between tiles and the output holds an unspecified prefix. */
  uint32_t deadline_ms;
  /* Video frames per second (durations, the A/V length rule); 0 = the
   * model's own rate (H3: 24). Must be finite and > 0 when set. */
  double fps;
  /* Nonzero waives the A/V length rule: with both latents the daemon
   * otherwise requires audio T == round(frames / fps * 40) (the reply's
   * expected_audio_latent_frames). */
  int32_t independent_lengths;
  int32_t reserved0; /* must be 0 */
  /* Per-window progress (vaed_decode_ex only); NULL = none. */
  vaed_progress_fn progress;
  void* progress_user_data; /* passed to `progress` as is */
  /* GPU: the caller's CUstream / cudaStream_t for latents and outputs in
   * CUDA regions (NULL = the legacy default stream); see
   * vaed_decode_on_stream. Ignored for host-only requests. Unrun on a GPU. */
  void* cuda_stream;
  /* Fields below were appended after the first published vaed_request;
   * a caller whose struct_size ends before them gets their defaults. */
  /* Streamed output (vaed_decode_ex only): non-NULL asks the daemon to
   * announce each part of the outputs as soon as it is final and calls this
   * for each (vaed_final_range_fn); NULL = none (the outputs are usable
   * when vaed_decode_ex returns). */
  vaed_final_range_fn final_range;
  void* final_range_user_data; /* passed to `final_range` as is */
  int32_t latent_space;        /* VAED_LATENT_SPACE_*; 0 = normalized */
  int32_t reserved1;           /* must be 0 */
} vaed_request;

/* What a plan or a decode produced (= vaed.v1.DecodeReply, flattened).
 * Initialise with VAED_REPLY_INIT or vaed_reply_init. Fields of a modality
 * the request did not carry are 0 / "". */
typedef struct vaed_reply {
  uint32_t struct_size; /* sizeof(vaed_reply): VAED_REPLY_INIT */
  int32_t planned_only; /* 1 = from vaed_plan_decode_ex: nothing decoded */
  /* Video. */
  int32_t output_ndim;
  int32_t output_dtype;                /* VAED_DTYPE_* */
  int64_t output_shape[VAED_MAX_DIMS]; /* elements */
  uint64_t output_bytes;
  uint32_t frames, height_px, width_px; /* pixels */
  int32_t warm;                         /* 0 = first decode of this shape bucket on a rank */
  int32_t demo_weights;                 /* 1 = the daemon's seeded demo model, not real output */
  int32_t independent_lengths;          /* 1 = the request waived the A/V length rule */
  uint64_t nonfinite_outputs;           /* NaN/Inf values in the decoded video (reported) */
  double fps;                           /* frames per second used */
  double video_seconds;                 /* frames / fps */
  /* The A/V length rule for `frames`: audio latent frames the video needs
   * (0 without video or for a model without audio). */
  uint64_t expected_audio_latent_frames;
  /* Audio (has_audio = 1 when the request carried audio_latent). */
  int32_t has_audio;
  int32_t audio_output_ndim;
  int64_t audio_output_shape[VAED_MAX_DIMS]; /* [channels, samples] */
  uint64_t audio_output_bytes;
  uint32_t audio_channels; /* 1 mono, 2 stereo (left, right) */
  uint32_t audio_sample_rate_hz;
  uint64_t audio_latent_frames;
  uint64_t audio_samples; /* per channel */
  double audio_seconds;   /* audio_samples / audio_sample_rate_hz */
  /* Checks of the decoded audio (0 for a plan): NaN/Inf count, every value
   * equal, RMS and peak |x| of the finite values, fraction at |x| >= 1. */
  uint64_t audio_nonfinite;
  int32_t audio_constant;
  int32_t reserved0;
  double audio_rms, audio_peak_abs, audio_clipped_fraction;
  /* How the request ran. */
  char model[64];
  char profile[32];
  char compile_decision[256]; /* e.g. "auto: eager (...)" */
  char stack_decision[256];   /* the tiled model's, else the request's resolution */
  /* Tiled video (0 for untiled models). */
  uint32_t tile_rows, tile_cols; /* tiles per window = tile_rows * tile_cols */
  uint32_t windows;              /* temporal windows */
  uint32_t decoder_calls;
  /* The VAE group that decoded the video. */
  uint32_t group_size;
  uint32_t group_ranks;     /* ranks listed in the group report */
  double group_imbalance;   /* max / mean of the ranks' tile seconds; 1 = even */
  char group_name[32];      /* e.g. "s2.b0" */
  char group_fallback[256]; /* why it did not run as planned; "" when it did */
  /* Memory (bytes) and host <-> device copies the daemon made. */
  uint64_t peak_rss_bytes;
  uint64_t peak_device_bytes;
  uint64_t host_copy_bytes;
  uint32_t host_copies;
  /* Timings per component ("decode", "audio_vae.decode_latent", ...; at
   * most VAED_MAX_TIMINGS, names truncated to 47 characters). */
  int32_t num_timings;
  vaed_timing timings[VAED_MAX_TIMINGS];
} vaed_reply;

#define VAED_REQUEST_INIT \
  { .struct_size = (uint32_t)sizeof(vaed_request) }
#define VAED_REPLY_INIT \
  { .struct_size = (uint32_t)sizeof(vaed_reply) }

/* Zero *request / *reply (all defaults) and set its struct_size: for structs
 * on the heap, and for C++ before C++20 (no designated initializers). */
static inline void vaed_request_init(vaed_request* request) {
  memset(request, 0, sizeof(*request));
  request->struct_size = (uint32_t)sizeof(*request);
}
static inline void vaed_reply_init(vaed_reply* reply) {
  memset(reply, 0, sizeof(*reply));
  reply->struct_size = (uint32_t)sizeof(*reply);
}

/* Plans `request` without decoding and without reading any memory: fills
 * *reply (planned_only = 1) with the video output's dtype, shape, bytes,
 * frames and pixel size, the audio output's shape and samples, the tile
 * grid and the A/V length rule, so that the caller can size its outputs.
 * Region ids, offsets, outputs, the progress and final_range callbacks
 * and cuda_stream are ignored. Errors: 1 for client / request / reply
 * NULL, a struct_size out of range, a request with neither latent nor
 * audio_latent, a tensor ndim outside 1..VAED_MAX_DIMS, an enum field out
 * of range, reserved0 != 0;
 * the daemon's refusal (1 naming the field, e.g. "latent.shape[1]", or the
 * A/V length rule; 2 unknown model; 5 a modality the model lacks); the
 * common errors above. */
VAED_C_API vaed_status vaed_plan_decode_ex(vaed_client* client, const vaed_request* request,
                                           vaed_reply* reply, char* err,
                                           size_t err_len) VAED_C_NOEXCEPT;

/* Decodes `request` (video, audio or both) into its outputs and fills
 * *reply (may be NULL) when it succeeds. The progress and final_range
 * callbacks, if any, run on this thread before the call returns. The
 * outputs' memory is written only by the daemon, during the call (a failed
 * or timed-out decode may leave them partly written; with final_range, the
 * ranges it delivered are complete). Errors: as vaed_plan_decode_ex, and 1
 * for `latent` without `output` (or the reverse) and `audio_latent` without
 * `audio_output` (or the reverse); the daemon's refusal of an output (1
 * "output.shape ...", 4 outside its region, 2 unknown region); 13 deadline
 * exceeded; 10 client fault; 11 an exception that left the progress or
 * final_range callback; 7 a streamed decode cut off by a reconnect after
 * it delivered a range; the common errors above. */
VAED_C_API vaed_status vaed_decode_ex(vaed_client* client, const vaed_request* request,
                                      vaed_reply* reply, char* err, size_t err_len) VAED_C_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* VAED_VAED_C_H_ */
