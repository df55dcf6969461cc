/* The C ABI test: plain C11, compiled as C, calls every
 * entry point of vaed/vaed_c.h against a real daemon, with good and bad
 * arguments (NULL pointers, struct sizes out of range, wrong shapes), and
 * checks each status and that each message names the bad argument.
 *
 * Usage: c_abi_test <socket> <mode>
 *   mode "h3":   the daemon has model "hv" (the H3 tiny golden video + audio
 *                decoders, ../shared/golden/h3): video, audio and A/V.
 *   mode "demo": the daemon has only its demo model (video); the audio
 *                checks are skipped and the program exits 77 (skipped)
 *                after the video checks pass.
 * c_abi_test.sh starts the daemon and picks the mode. Exit 0 = all passed,
 * 1 = a check failed (each failure printed), 77 = audio skipped. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vaed/vaed_c.h"

static int g_failures = 0;
static int g_checks = 0;

#define CHECK(cond, ...)                                                 \
  do {                                                                   \
    ++g_checks;                                                          \
    if (!(cond)) {                                                       \
      ++g_failures;                                                      \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
      fprintf(stderr, __VA_ARGS__);                                      \
      fputc('\n', stderr);                                               \
    }                                                                    \
  } while (0)

/* NULL = any message. */
static int contains(const char* message, const char* needle) {
  return needle == NULL || strstr(message, needle) != NULL;
}

/* A status and its message: `call` returned `want` and err names `needle`. */
#define EXPECT_STATUS(call, want, needle)                                             \
  do {                                                                                \
    err[0] = '\0';                                                                    \
    const vaed_status st_ = (call);                                                   \
    CHECK(st_ == (want), "%s returned %d (%s), want %d; err: %s", #call, (int)st_,    \
          vaed_status_name(st_), (int)(want), err);                                   \
    CHECK(contains(err, (needle)), "%s: message \"%s\" does not contain \"%s\"",    \
          #call, err, (needle) ? (needle) : "");                                      \
  } while (0)

#define EXPECT_OK(call) EXPECT_STATUS(call, VAED_STATUS_OK, NULL)

/* A model's test shapes. */
typedef struct {
  const char* model;
  int32_t latent_ndim;
  int64_t latent_shape[5];
  int64_t bad_latent_shape[5]; /* wrong channel count: the daemon names latent.shape[1] */
} video_case;

static const video_case kDemo = {"demo", 4, {2, 32, 3, 3, 0}, {2, 7, 3, 3, 0}};
static const video_case kH3 = {"hv", 5, {1, 24, 7, 16, 16}, {1, 16, 7, 16, 16}};

static uint64_t elements(const int64_t* shape, int32_t ndim) {
  uint64_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) n *= (uint64_t)shape[i];
  return n;
}

static vaed_tensor make_tensor(uint64_t region_id, uint64_t offset, int32_t dtype, int32_t ndim,
                               const int64_t* shape) {
  vaed_tensor t;
  memset(&t, 0, sizeof(t));
  t.region_id = region_id;
  t.offset = offset;
  t.dtype = dtype;
  t.ndim = ndim;
  for (int32_t i = 0; i < ndim; ++i) t.shape[i] = shape[i];
  return t;
}

/* Progress events seen by on_progress. */
typedef struct {
  int events;
  int in_order; /* fractions non-decreasing, each in [0, 1] */
  double last_fraction;
  char last_stage[16];
  int sized;    /* every event had struct_size >= the fields read here */
  void* self;   /* user_data round trip */
} progress_log;

static void on_progress(const vaed_progress* p, void* user_data) {
  progress_log* log = (progress_log*)user_data;
  if (log->self != log) return; /* wrong user_data: events stays 0 */
  if (p->struct_size < offsetof(vaed_progress, eta_seconds) + sizeof(double)) log->sized = 0;
  if (p->fraction < log->last_fraction || p->fraction < 0 || p->fraction > 1) log->in_order = 0;
  log->last_fraction = p->fraction;
  memcpy(log->last_stage, p->stage, sizeof(log->last_stage));
  ++log->events;
}

/* Streamed output seen by on_final_range (vaed_request.final_range): per
 * stage where the next range must begin, and whether each range already
 * held its final bytes when it was announced (compared with a reference
 * decode of the same latents: catches a frame written after it was
 * announced, or announced before it was written). */
typedef struct {
  void* self; /* user_data round trip */
  int ranges;
  int video_ranges;
  int ok;          /* every check held */
  char error[256]; /* the first check that failed */
  uint64_t video_next, audio_next;   /* end of the last range, per stage */
  uint64_t video_total, audio_total; /* frames; samples per channel */
  const unsigned char* video_out;    /* the streamed decode's frames */
  const unsigned char* video_ref;    /* the reference decode's */
  uint64_t frame_bytes;
  const unsigned char* audio_out;    /* float32 [channels, audio_total] */
  const unsigned char* audio_ref;
  uint64_t channels;
} final_log;

static void init_final_log(final_log* log) {
  memset(log, 0, sizeof(*log));
  log->self = log;
  log->ok = 1;
}

static void final_fail(final_log* log, const char* what, const vaed_final_range* r) {
  if (log->ok) {
    snprintf(log->error, sizeof(log->error), "%s: %s range [%llu, %llu) of %llu", what, r->stage,
             (unsigned long long)r->begin, (unsigned long long)r->end,
             (unsigned long long)r->total);
  }
  log->ok = 0;
}

static void on_final_range(const vaed_final_range* r, void* user_data) {
  final_log* log = (final_log*)user_data;
  if (log->self != log) return; /* wrong user_data: ranges stays 0 */
  ++log->ranges;
  if (r->struct_size < offsetof(vaed_final_range, total) + sizeof(uint64_t)) {
    final_fail(log, "struct_size too small", r);
    return;
  }
  const int video = strcmp(r->stage, "video") == 0;
  if (!video && strcmp(r->stage, "audio") != 0) {
    final_fail(log, "unknown stage", r);
    return;
  }
  if (strcmp(r->unit, video ? "frames" : "samples") != 0) final_fail(log, "wrong unit", r);
  uint64_t* next = video ? &log->video_next : &log->audio_next;
  const uint64_t total = video ? log->video_total : log->audio_total;
  if (r->begin != *next || r->end <= r->begin || r->end > r->total || r->total != total) {
    final_fail(log, "not contiguous from 0 up to the stage's total", r);
    return;
  }
  *next = r->end;
  if (video) {
    ++log->video_ranges;
    const uint64_t offset = r->begin * log->frame_bytes;
    if (memcmp(log->video_out + offset, log->video_ref + offset,
               (r->end - r->begin) * log->frame_bytes) != 0) {
      final_fail(log, "frames not final when announced", r);
    }
    return;
  }
  for (uint64_t ch = 0; ch < log->channels; ++ch) {
    const uint64_t offset = (ch * total + r->begin) * sizeof(float);
    if (memcmp(log->audio_out + offset, log->audio_ref + offset,
               (r->end - r->begin) * sizeof(float)) != 0) {
      final_fail(log, "samples not final when announced", r);
    }
  }
}

/* Entry points that need no daemon: names, NULL handles, bad arguments. */
static void check_without_daemon(void) {
  char err[256];
  CHECK(strcmp(vaed_status_name(VAED_STATUS_OK), "ok") == 0, "%s", vaed_status_name(0));
  CHECK(strcmp(vaed_status_name(VAED_STATUS_INVALID_ARGUMENT), "invalid_argument") == 0, "%s",
        vaed_status_name(1));
  CHECK(strcmp(vaed_status_name(VAED_STATUS_UNAVAILABLE), "unavailable") == 0, "%s",
        vaed_status_name(7));
  CHECK(strcmp(vaed_status_name(VAED_STATUS_UNKNOWN_CLIENT), "unknown_client") == 0, "%s",
        vaed_status_name(18));
  CHECK(strcmp(vaed_status_name(999), "unknown") == 0, "%s", vaed_status_name(999));

  vaed_client_free(NULL);
  vaed_region_free(NULL);
  CHECK(vaed_region_data(NULL) == NULL, "vaed_region_data(NULL)");
  CHECK(vaed_region_size(NULL) == 0, "vaed_region_size(NULL)");

  EXPECT_STATUS(vaed_connect(NULL, NULL, NULL, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "out is NULL");
  vaed_client* none = NULL;
  EXPECT_STATUS(vaed_connect("/nonexistent-vaed-dir/vaed.sock", "c-abi", &none, err, sizeof(err)),
                VAED_STATUS_UNAVAILABLE, "/nonexistent-vaed-dir/vaed.sock");
  CHECK(none == NULL, "a failed vaed_connect wrote *out");
  /* err may be NULL; a short buffer gets a truncated, NUL-terminated message. */
  CHECK(vaed_connect(NULL, NULL, NULL, NULL, 0) == VAED_STATUS_INVALID_ARGUMENT, "err NULL");
  char small[8];
  memset(small, 'x', sizeof(small));
  CHECK(vaed_connect(NULL, NULL, NULL, small, sizeof(small)) == VAED_STATUS_INVALID_ARGUMENT,
        "small err");
  CHECK(strlen(small) == sizeof(small) - 1 && strncmp(small, "invalid", 7) == 0, "small: %.8s",
        small);

  EXPECT_STATUS(vaed_region_create(64, NULL, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "out is NULL");

  /* Every client entry point refuses a NULL client, naming it. */
  vaed_tensor t = make_tensor(1, 0, VAED_DTYPE_FLOAT32, kDemo.latent_ndim, kDemo.latent_shape);
  vaed_decode_result result;
  vaed_request request = VAED_REQUEST_INIT;
  request.latent = &t;
  vaed_reply reply = VAED_REPLY_INIT;
  vaed_cuda_region cuda;
  uint64_t id = 0;
  EXPECT_STATUS(vaed_register_region(NULL, NULL, &id, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "client is NULL");
  EXPECT_STATUS(vaed_unregister_region(NULL, 1, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "client is NULL");
  EXPECT_STATUS(vaed_plan_decode(NULL, NULL, &t, VAED_OUTPUT_UINT8_NHWC, &result, err,
                                 sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "client is NULL");
  EXPECT_STATUS(vaed_decode(NULL, NULL, &t, &t, VAED_OUTPUT_UINT8_NHWC, &result, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "client is NULL");
  EXPECT_STATUS(vaed_decode_on_stream(NULL, NULL, &t, &t, VAED_OUTPUT_UINT8_NHWC, NULL, &result,
                                      err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "client is NULL");
  EXPECT_STATUS(vaed_register_cuda_region(NULL, &id, 8, &cuda, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "client is NULL");
  EXPECT_STATUS(vaed_plan_decode_ex(NULL, &request, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "client is NULL");
  EXPECT_STATUS(vaed_decode_ex(NULL, &request, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "client is NULL");
}

/* Bad requests refused before anything is sent (a connected client). */
static void check_bad_requests(vaed_client* c, const video_case* v) {
  char err[512];
  vaed_tensor latent = make_tensor(1, 0, VAED_DTYPE_FLOAT32, v->latent_ndim, v->latent_shape);
  vaed_request rq = VAED_REQUEST_INIT;
  rq.model = v->model;
  rq.latent = &latent;
  vaed_reply reply = VAED_REPLY_INIT;

  EXPECT_STATUS(vaed_plan_decode_ex(c, NULL, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request is NULL");
  EXPECT_STATUS(vaed_plan_decode_ex(c, &rq, NULL, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "reply is NULL");
  EXPECT_STATUS(vaed_decode_ex(c, NULL, NULL, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "request is NULL");

  /* struct_size too small: an uninitialised or zeroed struct. */
  vaed_request zero;
  memset(&zero, 0, sizeof(zero));
  zero.latent = &latent;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &zero, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->struct_size is 0");
  vaed_request small_rq = rq;
  small_rq.struct_size = (uint32_t)offsetof(vaed_request, cuda_stream);
  EXPECT_STATUS(vaed_decode_ex(c, &small_rq, NULL, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->struct_size");
  vaed_reply small_reply = VAED_REPLY_INIT;
  small_reply.struct_size = 8;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &rq, &small_reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "reply->struct_size is 8");
  EXPECT_STATUS(vaed_decode_ex(c, &rq, &small_reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "reply->struct_size is 8");

  /* A request from a newer header: unknown trailing bytes must be zero. */
  struct {
    vaed_request base;
    uint64_t newer_field;
  } newer;
  memset(&newer, 0, sizeof(newer));
  newer.base = rq;
  newer.base.struct_size = (uint32_t)sizeof(newer);
  newer.newer_field = 1;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &newer.base, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "does not know");

  /* Nothing to decode; a latent without its output; an output without its latent. */
  vaed_request empty = VAED_REQUEST_INIT;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &empty, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->latent and request->audio_latent");
  EXPECT_STATUS(vaed_decode_ex(c, &rq, NULL, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "request->output is NULL");
  vaed_request out_only = VAED_REQUEST_INIT;
  out_only.audio_latent = &latent;
  out_only.audio_output = &latent;
  out_only.output = &latent;
  EXPECT_STATUS(vaed_decode_ex(c, &out_only, NULL, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->output is set but request->latent");
  vaed_request audio_no_out = VAED_REQUEST_INIT;
  audio_no_out.audio_latent = &latent;
  EXPECT_STATUS(vaed_decode_ex(c, &audio_no_out, NULL, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->audio_output is NULL");

  /* Enum fields and tensors out of range. */
  vaed_request bad = rq;
  bad.output_format = 9;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->output_format is 9");
  bad = rq;
  bad.stack_tiling = 7;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->stack_tiling is 7");
  bad = rq;
  bad.compile = -1;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->compile is -1");
  bad = rq;
  bad.reserved0 = 1;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->reserved0");
  bad = rq;
  bad.latent_space = 3;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->latent_space is 3");
  bad = rq;
  bad.reserved1 = 1;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->reserved1");
  vaed_tensor deep = latent;
  deep.ndim = VAED_MAX_DIMS + 1;
  bad = rq;
  bad.latent = &deep;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &reply, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "request->latent.ndim is 9");

  /* The legacy entry points name their arguments too. */
  vaed_decode_result result;
  EXPECT_STATUS(vaed_plan_decode(c, v->model, NULL, VAED_OUTPUT_UINT8_NHWC, &result, err,
                                 sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "latent is NULL");
  deep.ndim = 0;
  EXPECT_STATUS(vaed_plan_decode(c, v->model, &deep, VAED_OUTPUT_UINT8_NHWC, &result, err,
                                 sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "latent.ndim is 0");
  EXPECT_STATUS(vaed_decode(c, v->model, &latent, NULL, VAED_OUTPUT_UINT8_NHWC, &result, err,
                            sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "output is NULL");
  EXPECT_STATUS(vaed_decode_on_stream(c, v->model, NULL, &latent, VAED_OUTPUT_UINT8_NHWC, NULL,
                                      &result, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "latent is NULL");
  uint64_t id = 0;
  EXPECT_STATUS(vaed_register_region(c, NULL, &id, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "region is NULL");
  EXPECT_STATUS(vaed_register_cuda_region(c, &id, 8, NULL, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "out is NULL");
}

/* Video through the legacy entry points and vaed_decode_ex, same bytes. */
static void check_video(vaed_client* c, const video_case* v) {
  char err[512];
  vaed_tensor latent = make_tensor(0, 0, VAED_DTYPE_FLOAT32, v->latent_ndim, v->latent_shape);
  vaed_decode_result plan;
  EXPECT_OK(vaed_plan_decode(c, v->model, &latent, VAED_OUTPUT_UINT8_NHWC, &plan, err,
                             sizeof(err)));
  CHECK(plan.output_bytes > 0 && plan.output_ndim == 4, "plan %llu bytes, ndim %d",
        (unsigned long long)plan.output_bytes, plan.output_ndim);

  vaed_request rq = VAED_REQUEST_INIT;
  rq.model = v->model;
  rq.latent = &latent;
  vaed_reply p = VAED_REPLY_INIT;
  EXPECT_OK(vaed_plan_decode_ex(c, &rq, &p, err, sizeof(err)));
  CHECK(p.struct_size == sizeof(vaed_reply), "struct_size %u", p.struct_size);
  CHECK(p.planned_only == 1, "planned_only %d", p.planned_only);
  CHECK(p.output_bytes == plan.output_bytes && p.frames == plan.frames &&
            p.height_px == plan.height_px && p.width_px == plan.width_px,
        "plan_ex %llu bytes %u frames vs plan %llu bytes %u frames",
        (unsigned long long)p.output_bytes, p.frames, (unsigned long long)plan.output_bytes,
        plan.frames);
  CHECK(p.output_dtype == VAED_DTYPE_UINT8 && p.has_audio == 0, "dtype %d audio %d",
        p.output_dtype, p.has_audio);

  const uint64_t in_bytes = elements(v->latent_shape, v->latent_ndim) * 4;
  vaed_region *in = NULL, *out = NULL, *out2 = NULL;
  EXPECT_OK(vaed_region_create(in_bytes, &in, err, sizeof(err)));
  EXPECT_OK(vaed_region_create(plan.output_bytes, &out, err, sizeof(err)));
  EXPECT_OK(vaed_region_create(plan.output_bytes, &out2, err, sizeof(err)));
  if (!in || !out || !out2) {
    CHECK(0, "regions not created");
    vaed_region_free(in);
    vaed_region_free(out);
    vaed_region_free(out2);
    return;
  }
  CHECK(vaed_region_size(in) == in_bytes, "region size %llu",
        (unsigned long long)vaed_region_size(in));
  float* values = (float*)vaed_region_data(in);
  CHECK(values != NULL, "region data NULL");
  for (uint64_t i = 0; i < in_bytes / 4; ++i) values[i] = (float)((i * 7919u) % 200u) / 100.0f - 1;

  uint64_t out_id = 0, out2_id = 0;
  EXPECT_OK(vaed_register_region(c, in, &latent.region_id, err, sizeof(err)));
  EXPECT_OK(vaed_register_region(c, out, &out_id, err, sizeof(err)));
  EXPECT_OK(vaed_register_region(c, out2, &out2_id, err, sizeof(err)));
  vaed_tensor output = make_tensor(out_id, 0, plan.output_dtype, plan.output_ndim,
                                   plan.output_shape);
  vaed_tensor output2 = make_tensor(out2_id, 0, plan.output_dtype, plan.output_ndim,
                                    plan.output_shape);

  vaed_decode_result legacy;
  EXPECT_OK(vaed_decode(c, v->model, &latent, &output, VAED_OUTPUT_UINT8_NHWC, &legacy, err,
                        sizeof(err)));
  CHECK(legacy.frames == plan.frames && legacy.num_timings > 0, "frames %u timings %d",
        legacy.frames, legacy.num_timings);
  EXPECT_OK(vaed_decode_on_stream(c, v->model, &latent, &output, VAED_OUTPUT_UINT8_NHWC, NULL,
                                  NULL, err, sizeof(err)));

  /* Every option of vaed_request that a CPU daemon accepts. */
  progress_log log = {0, 1, 0.0, "", 1, NULL};
  log.self = &log;
  rq.output = &output2;
  rq.output_format = VAED_OUTPUT_UINT8_NHWC;
  rq.profile = "safe";
  rq.stack_tiling = VAED_STACK_TILING_AUTO;
  rq.compile = VAED_COMPILE_AUTO;
  rq.group_size = 0;
  rq.deadline_ms = 600000;
  rq.fps = 24;
  rq.progress = on_progress;
  rq.progress_user_data = &log;
  struct {
    vaed_reply base;
    uint64_t newer_field; /* a newer caller's field: zeroed by this library */
  } r;
  memset(&r, 0, sizeof(r));
  r.base.struct_size = (uint32_t)sizeof(r);
  r.newer_field = 0xdeadbeef;
  EXPECT_OK(vaed_decode_ex(c, &rq, &r.base, err, sizeof(err)));
  CHECK(r.base.struct_size == sizeof(r), "struct_size changed to %u", r.base.struct_size);
  CHECK(r.newer_field == 0, "bytes past the library's reply not zeroed");
  CHECK(r.base.planned_only == 0 && r.base.frames == plan.frames, "planned_only %d frames %u",
        r.base.planned_only, r.base.frames);
  CHECK(strcmp(r.base.profile, "safe") == 0, "profile \"%s\"", r.base.profile);
  CHECK(strcmp(r.base.model, v->model) == 0, "model \"%s\"", r.base.model);
  CHECK(r.base.fps == 24, "fps %g", r.base.fps);
  CHECK(r.base.num_timings > 0, "no timings");
  CHECK(r.base.compile_decision[0] != '\0', "compile_decision empty");
  CHECK(log.in_order && log.sized, "progress out of order or short");
  if (log.events > 0) {
    CHECK(log.last_fraction == 1.0, "last progress fraction %g", log.last_fraction);
  }
  if (strcmp(v->model, "hv") == 0) {
    /* The H3 tiny decoder reports one event per temporal window. */
    CHECK(log.events >= 1 && strcmp(log.last_stage, "video") == 0, "%d events, last \"%s\"",
          log.events, log.last_stage);
    CHECK(r.base.tile_rows >= 1 && r.base.windows >= 1, "tiles %ux%u windows %u",
          r.base.tile_rows, r.base.tile_cols, r.base.windows);
    CHECK(r.base.demo_weights == 0, "demo_weights");
  } else {
    CHECK(r.base.demo_weights == 1, "demo_weights %d", r.base.demo_weights);
  }
  /* The same latent, the same bytes, whichever entry point decoded it. */
  CHECK(memcmp(vaed_region_data(out), vaed_region_data(out2), plan.output_bytes) == 0,
        "vaed_decode and vaed_decode_ex wrote different frames");

  /* Wrong shapes: the daemon's refusal names the field. */
  vaed_tensor bad_latent = latent;
  for (int32_t i = 0; i < v->latent_ndim; ++i) bad_latent.shape[i] = v->bad_latent_shape[i];
  vaed_decode_result unused;
  EXPECT_STATUS(vaed_decode(c, v->model, &bad_latent, &output, VAED_OUTPUT_UINT8_NHWC, &unused,
                            err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "latent.shape[1]");
  vaed_request bad = rq;
  bad.progress = NULL;
  bad.latent = &bad_latent;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &p, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "latent.shape[1]");
  vaed_tensor short_output = output2;
  short_output.shape[0] -= 1; /* within the region: a shape the plan does not give */
  bad = rq;
  bad.progress = NULL;
  bad.output = &short_output;
  EXPECT_STATUS(vaed_decode_ex(c, &bad, NULL, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "output");
  bad = rq;
  bad.progress = NULL;
  bad.model = "no-such-model";
  EXPECT_STATUS(vaed_decode_ex(c, &bad, NULL, err, sizeof(err)), VAED_STATUS_NOT_FOUND,
                "no-such-model");

  /* Unregister: 0, and 2 (not found) for an id never registered. */
  EXPECT_OK(vaed_unregister_region(c, out2_id, err, sizeof(err)));
  EXPECT_STATUS(vaed_unregister_region(c, 987654321, err, sizeof(err)), VAED_STATUS_NOT_FOUND,
                NULL);
  EXPECT_OK(vaed_unregister_region(c, latent.region_id, err, sizeof(err)));
  EXPECT_OK(vaed_unregister_region(c, out_id, err, sizeof(err)));
  vaed_region_free(in);
  vaed_region_free(out);
  vaed_region_free(out2);
}

/* Streamed output (vaed_request.final_range) of a decode with several
 * final ranges (demo: 10 frames in batches of 4; hv: two temporal windows):
 * the ranges are contiguous from frame 0 to the last, each holds its final
 * bytes when announced, all come before vaed_decode_ex returns, and the
 * output equals a decode without streaming. A caller built against the
 * header before final_range (a smaller struct_size) gets no callbacks. */
static void check_streamed_video(vaed_client* c, const video_case* v) {
  char err[512];
  const int64_t demo_shape[4] = {10, 32, 3, 3};
  const int64_t h3_shape[5] = {1, 24, 12, 16, 16};
  const int h3 = strcmp(v->model, "hv") == 0;
  const int32_t ndim = h3 ? 5 : 4;
  const int64_t* shape = h3 ? h3_shape : demo_shape;
  vaed_tensor latent = make_tensor(0, 0, VAED_DTYPE_FLOAT32, ndim, shape);
  vaed_request rq = VAED_REQUEST_INIT;
  rq.model = v->model;
  rq.latent = &latent;
  vaed_reply plan = VAED_REPLY_INIT;
  EXPECT_OK(vaed_plan_decode_ex(c, &rq, &plan, err, sizeof(err)));
  if (plan.frames == 0) {
    CHECK(0, "plan has no frames");
    return;
  }

  const uint64_t in_bytes = elements(shape, ndim) * 4;
  vaed_region *in = NULL, *ref = NULL, *out = NULL;
  EXPECT_OK(vaed_region_create(in_bytes, &in, err, sizeof(err)));
  EXPECT_OK(vaed_region_create(plan.output_bytes, &ref, err, sizeof(err)));
  EXPECT_OK(vaed_region_create(plan.output_bytes, &out, err, sizeof(err)));
  if (!in || !ref || !out) {
    CHECK(0, "regions not created");
    vaed_region_free(in);
    vaed_region_free(ref);
    vaed_region_free(out);
    return;
  }
  float* values = (float*)vaed_region_data(in);
  for (uint64_t i = 0; i < in_bytes / 4; ++i) {
    values[i] = (float)((i * 6007u) % 250u) / 100.0f - 1.25f;
  }
  uint64_t ref_id = 0, out_id = 0;
  EXPECT_OK(vaed_register_region(c, in, &latent.region_id, err, sizeof(err)));
  EXPECT_OK(vaed_register_region(c, ref, &ref_id, err, sizeof(err)));
  EXPECT_OK(vaed_register_region(c, out, &out_id, err, sizeof(err)));
  vaed_tensor ref_output = make_tensor(ref_id, 0, plan.output_dtype, plan.output_ndim,
                                       plan.output_shape);
  vaed_tensor output = make_tensor(out_id, 0, plan.output_dtype, plan.output_ndim,
                                   plan.output_shape);

  /* The reference: no streaming. */
  rq.output = &ref_output;
  vaed_reply reply = VAED_REPLY_INIT;
  EXPECT_OK(vaed_decode_ex(c, &rq, &reply, err, sizeof(err)));

  /* Streamed, into an output that holds none of the final bytes yet. */
  memset(vaed_region_data(out), 0xa5, plan.output_bytes);
  final_log log;
  init_final_log(&log);
  log.video_total = plan.frames;
  log.video_out = (const unsigned char*)vaed_region_data(out);
  log.video_ref = (const unsigned char*)vaed_region_data(ref);
  log.frame_bytes = plan.output_bytes / plan.frames;
  vaed_request streamed = rq;
  streamed.output = &output;
  streamed.final_range = on_final_range;
  streamed.final_range_user_data = &log;
  EXPECT_OK(vaed_decode_ex(c, &streamed, &reply, err, sizeof(err)));
  CHECK(log.ok, "%s", log.error);
  CHECK(log.ranges >= 2 && log.video_ranges == log.ranges && log.video_next == plan.frames,
        "%d ranges (%d video) ending at frame %llu of %u", log.ranges, log.video_ranges,
        (unsigned long long)log.video_next, plan.frames);
  if (h3) {
    CHECK(log.video_ranges == (int)reply.windows, "%d ranges for %u temporal windows",
          log.video_ranges, reply.windows);
  }
  CHECK(memcmp(vaed_region_data(out), vaed_region_data(ref), plan.output_bytes) == 0,
        "the streamed decode wrote other bytes than the decode without streaming");

  /* A request as an older header declared it: struct_size ends before
   * final_range, so whatever lies there is not read (no callback). */
  init_final_log(&log);
  vaed_request older = streamed;
  older.struct_size = (uint32_t)offsetof(vaed_request, final_range);
  EXPECT_OK(vaed_decode_ex(c, &older, NULL, err, sizeof(err)));
  CHECK(log.ranges == 0, "%d final ranges for a struct_size that ends before final_range",
        log.ranges);
  /* vaed_plan_decode_ex ignores the callback. */
  init_final_log(&log);
  EXPECT_OK(vaed_plan_decode_ex(c, &streamed, &reply, err, sizeof(err)));
  CHECK(log.ranges == 0 && reply.planned_only == 1, "a plan called final_range %d times",
        log.ranges);

  EXPECT_OK(vaed_unregister_region(c, latent.region_id, err, sizeof(err)));
  EXPECT_OK(vaed_unregister_region(c, ref_id, err, sizeof(err)));
  EXPECT_OK(vaed_unregister_region(c, out_id, err, sizeof(err)));
  vaed_region_free(in);
  vaed_region_free(ref);
  vaed_region_free(out);
}

/* Audio alone, and video + audio under the A/V length rule (model "hv"). */
static void check_audio(vaed_client* c) {
  char err[512];
  const int64_t video_shape[5] = {1, 24, 7, 16, 16}; /* 22 frames at 24 fps */
  const int64_t audio_shape[3] = {1, 32, 37};         /* round(22 / 24 * 40) = 37 */
  const int64_t short_audio[3] = {1, 32, 30};
  vaed_tensor latent = make_tensor(0, 0, VAED_DTYPE_FLOAT32, 5, video_shape);
  vaed_tensor audio_latent = make_tensor(0, 0, VAED_DTYPE_FLOAT32, 3, audio_shape);

  vaed_request rq = VAED_REQUEST_INIT;
  rq.model = "hv";
  rq.latent = &latent;
  rq.audio_latent = &audio_latent;
  vaed_reply plan = VAED_REPLY_INIT;
  EXPECT_OK(vaed_plan_decode_ex(c, &rq, &plan, err, sizeof(err)));
  CHECK(plan.frames == 22 && plan.height_px == 256 && plan.width_px == 256,
        "frames %u, %ux%u px", plan.frames, plan.width_px, plan.height_px);
  CHECK(plan.expected_audio_latent_frames == 37, "expected audio T %llu",
        (unsigned long long)plan.expected_audio_latent_frames);
  CHECK(plan.has_audio == 1 && plan.audio_channels == 1 && plan.audio_samples == 29600 &&
            plan.audio_sample_rate_hz == 32000 && plan.audio_output_ndim == 2 &&
            plan.audio_output_shape[0] == 1 && plan.audio_output_shape[1] == 29600 &&
            plan.audio_output_bytes == 29600 * 4,
        "audio: has %d, %u ch, %llu samples at %u Hz, %llu bytes", plan.has_audio,
        plan.audio_channels, (unsigned long long)plan.audio_samples, plan.audio_sample_rate_hz,
        (unsigned long long)plan.audio_output_bytes);

  /* The A/V length rule, and its waiver. */
  vaed_tensor short_latent = make_tensor(0, 0, VAED_DTYPE_FLOAT32, 3, short_audio);
  vaed_request rule = rq;
  rule.audio_latent = &short_latent;
  vaed_reply unused = VAED_REPLY_INIT;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &rule, &unused, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "= 37 audio latent frames");
  rule.independent_lengths = 1;
  EXPECT_OK(vaed_plan_decode_ex(c, &rule, &unused, err, sizeof(err)));
  CHECK(unused.independent_lengths == 1 && unused.audio_samples == 30 * 800,
        "independent %d samples %llu", unused.independent_lengths,
        (unsigned long long)unused.audio_samples);
  /* A wrong audio latent shape is named. */
  const int64_t bad_audio[3] = {1, 16, 37};
  vaed_tensor bad_latent = make_tensor(0, 0, VAED_DTYPE_FLOAT32, 3, bad_audio);
  vaed_request bad = rq;
  bad.audio_latent = &bad_latent;
  EXPECT_STATUS(vaed_plan_decode_ex(c, &bad, &unused, err, sizeof(err)),
                VAED_STATUS_INVALID_ARGUMENT, "audio_latent");

  /* One input region (video latent, then audio latent) and one output
   * region (frames, then samples). */
  const uint64_t video_in = elements(video_shape, 5) * 4;
  const uint64_t audio_in = elements(audio_shape, 3) * 4;
  vaed_region *in = NULL, *out = NULL;
  EXPECT_OK(vaed_region_create(video_in + audio_in, &in, err, sizeof(err)));
  EXPECT_OK(vaed_region_create(plan.output_bytes + plan.audio_output_bytes, &out, err,
                               sizeof(err)));
  if (!in || !out) {
    CHECK(0, "regions not created");
    vaed_region_free(in);
    vaed_region_free(out);
    return;
  }
  float* values = (float*)vaed_region_data(in);
  for (uint64_t i = 0; i < (video_in + audio_in) / 4; ++i) {
    values[i] = (float)((i * 104729u) % 300u) / 100.0f - 1.5f;
  }
  float* samples = (float*)((unsigned char*)vaed_region_data(out) + plan.output_bytes);
  for (uint64_t i = 0; i < plan.audio_samples; ++i) samples[i] = 1234.5f; /* overwritten */
  uint64_t in_id = 0, out_id = 0;
  EXPECT_OK(vaed_register_region(c, in, &in_id, err, sizeof(err)));
  EXPECT_OK(vaed_register_region(c, out, &out_id, err, sizeof(err)));
  latent.region_id = in_id;
  audio_latent.region_id = in_id;
  audio_latent.offset = video_in;
  vaed_tensor output = make_tensor(out_id, 0, plan.output_dtype, plan.output_ndim,
                                   plan.output_shape);
  vaed_tensor audio_output = make_tensor(out_id, plan.output_bytes, VAED_DTYPE_FLOAT32,
                                         plan.audio_output_ndim, plan.audio_output_shape);

  /* Audio only. */
  progress_log log = {0, 1, 0.0, "", 1, NULL};
  log.self = &log;
  vaed_request audio_only = VAED_REQUEST_INIT;
  audio_only.model = "hv";
  audio_only.audio_latent = &audio_latent;
  audio_only.audio_output = &audio_output;
  audio_only.progress = on_progress;
  audio_only.progress_user_data = &log;
  vaed_reply reply = VAED_REPLY_INIT;
  EXPECT_OK(vaed_decode_ex(c, &audio_only, &reply, err, sizeof(err)));
  CHECK(reply.has_audio == 1 && reply.frames == 0 && reply.audio_samples == 29600,
        "audio-only: has %d frames %u samples %llu", reply.has_audio, reply.frames,
        (unsigned long long)reply.audio_samples);
  CHECK(reply.audio_nonfinite == 0 && reply.audio_peak_abs > 0, "nonfinite %llu peak %g",
        (unsigned long long)reply.audio_nonfinite, reply.audio_peak_abs);
  CHECK(samples[0] != 1234.5f && samples[plan.audio_samples - 1] != 1234.5f,
        "audio output not written");
  CHECK(log.events >= 1 && strcmp(log.last_stage, "audio") == 0 && log.last_fraction == 1.0,
        "audio progress: %d events, last \"%s\" at %g", log.events, log.last_stage,
        log.last_fraction);

  /* Video and audio in one request, with progress. */
  log.events = 0;
  log.last_fraction = 0;
  vaed_request both = rq;
  both.output = &output;
  both.audio_output = &audio_output;
  both.progress = on_progress;
  both.progress_user_data = &log;
  both.fps = 24;
  EXPECT_OK(vaed_decode_ex(c, &both, &reply, err, sizeof(err)));
  CHECK(reply.frames == 22 && reply.has_audio == 1 && reply.audio_samples == 29600 &&
            reply.expected_audio_latent_frames == 37,
        "A/V: frames %u audio %d samples %llu", reply.frames, reply.has_audio,
        (unsigned long long)reply.audio_samples);
  CHECK(log.events >= 2 && log.in_order && strcmp(log.last_stage, "audio") == 0 &&
            log.last_fraction == 1.0,
        "A/V progress: %d events, last \"%s\" at %g", log.events, log.last_stage,
        log.last_fraction);

  /* The same request streamed: video ranges and one audio range, each
   * final when announced (compared with the decode above), with progress
   * still reported. */
  const uint64_t out_bytes = plan.output_bytes + plan.audio_output_bytes;
  unsigned char* reference = (unsigned char*)malloc(out_bytes);
  CHECK(reference != NULL, "malloc");
  if (reference) {
    memcpy(reference, vaed_region_data(out), out_bytes);
    memset(vaed_region_data(out), 0xa5, out_bytes);
    final_log fl;
    init_final_log(&fl);
    fl.video_total = plan.frames;
    fl.video_out = (const unsigned char*)vaed_region_data(out);
    fl.video_ref = reference;
    fl.frame_bytes = plan.output_bytes / plan.frames;
    fl.audio_total = plan.audio_samples;
    fl.audio_out = fl.video_out + plan.output_bytes;
    fl.audio_ref = reference + plan.output_bytes;
    fl.channels = plan.audio_channels;
    log.events = 0;
    log.last_fraction = 0;
    vaed_request streamed = both;
    streamed.final_range = on_final_range;
    streamed.final_range_user_data = &fl;
    EXPECT_OK(vaed_decode_ex(c, &streamed, &reply, err, sizeof(err)));
    CHECK(fl.ok, "%s", fl.error);
    CHECK(fl.video_ranges >= 1 && fl.ranges == fl.video_ranges + 1 &&
              fl.video_next == plan.frames && fl.audio_next == plan.audio_samples,
          "A/V streamed: %d ranges (%d video), video up to %llu of %u, audio up to %llu of %llu",
          fl.ranges, fl.video_ranges, (unsigned long long)fl.video_next, plan.frames,
          (unsigned long long)fl.audio_next, (unsigned long long)plan.audio_samples);
    CHECK(log.events >= 2 && log.last_fraction == 1.0, "streamed A/V progress: %d events at %g",
          log.events, log.last_fraction);
    CHECK(memcmp(vaed_region_data(out), reference, out_bytes) == 0,
          "the streamed A/V decode wrote other bytes than the decode without streaming");
    free(reference);
  }

  /* A wrong audio output shape is named. */
  vaed_tensor bad_output = audio_output;
  bad_output.shape[1] -= 1;
  bad = both;
  bad.progress = NULL;
  bad.audio_output = &bad_output;
  EXPECT_STATUS(vaed_decode_ex(c, &bad, NULL, err, sizeof(err)), VAED_STATUS_INVALID_ARGUMENT,
                "audio_output");

  EXPECT_OK(vaed_unregister_region(c, in_id, err, sizeof(err)));
  EXPECT_OK(vaed_unregister_region(c, out_id, err, sizeof(err)));
  vaed_region_free(in);
  vaed_region_free(out);
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[2], "h3") != 0 && strcmp(argv[2], "demo") != 0)) {
    fprintf(stderr, "usage: %s <socket> h3|demo\n", argv[0]);
    return 2;
  }
  const char* socket = argv[1];
  const int h3 = strcmp(argv[2], "h3") == 0;
  const video_case* v = h3 ? &kH3 : &kDemo;
  char err[256];

  check_without_daemon();

  vaed_client* c = NULL;
  EXPECT_OK(vaed_connect(socket, "c-abi-test", &c, err, sizeof(err)));
  if (!c) {
    fprintf(stderr, "FAIL: cannot connect to %s: %s\n", socket, err);
    return 1;
  }
  check_bad_requests(c, v);
  check_video(c, v);
  check_streamed_video(c, v);
  if (h3) check_audio(c);

  /* A CPU-only daemon refuses CUDA regions before loading the driver. */
  vaed_cuda_region cuda;
  uint64_t host_word = 0;
  EXPECT_STATUS(vaed_register_cuda_region(c, &host_word, sizeof(host_word), &cuda, err,
                                          sizeof(err)),
                VAED_STATUS_FAILED_PRECONDITION, "no CUDA ranks");

  vaed_client_free(c);

  printf("%s: %d checks, %d failed\n", g_failures ? "FAIL" : "OK", g_checks, g_failures);
  if (g_failures) return 1;
  if (!h3) {
    printf("SKIP: audio and A/V checks need the H3 tiny golden decoders "
           "(../shared/golden/h3 is absent); video checks passed on the demo model\n");
    return 77;
  }
  return 0;
}
