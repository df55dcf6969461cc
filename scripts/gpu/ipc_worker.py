#!/usr/bin/env python3
"""A stand-in DiT worker: decodes CUDA tensors through vaed by CUDA IPC.

Usage: ipc_worker.py --socket PATH --latent FILE [--key latent] [--model NAME]
                     [--iterations N] --figures FILE
       ipc_worker.py --mode long --socket PATH [--latent-shape 1,24,T,H,W]
                     [--slow-tiles] [--model NAME] --figures FILE
       ipc_worker.py --mode ordering --socket PATH --latent FILE [--model NAME]
                     --figures FILE

The second process of scripts/gpu/check.sh's two-process IPC check (the
first is the vaed daemon at --socket, decoding on its CUDA ranks). Like a
DiT worker, it allocates the latent and the output as CUDA tensors with
torch on its current device and stream, and decodes through the vaed_client
package (CUDA tensors are accepted through
``__cuda_array_interface__`` / DLPack, registered by CUDA IPC, and the
frames are written in this process's device memory, ordered on ``stream=``,
the ``cudaStream_t`` as an int, here torch's current stream). It then:

* decodes the same latent from host memory (numpy, the host path) and
  checks that the CUDA-path frames equal those bytes (same daemon, same
  kernels: expected bit for bit), after poisoning the output tensor so an
  unwritten value shows;
* times --iterations warm CUDA-path decodes: the client round trip (call to
  the end of the caller's stream work) against the daemon's own ``decode``
  timing; their difference is the sidecar overhead (IPC, events, socket);
* reads how many host copies the daemon made for the request from its reply
  (``host_copies``, or ``host_copy_bytes``), when the reply has such a field,
  and its ``peak_device_bytes`` and whether it carried an outputs-ready event;
* decodes once more through managed buffers, when ``Client.alloc_latent``
  takes ``device=``: latent and output in device memory the client library
  allocated, compared with the host-path frames as well.

Output tensor: when ``Client.decode`` takes ``output=``, the frames go into a
uint8 [F, H, W, 3] CUDA tensor allocated here; otherwise into the output
buffer the client library allocates (``result.frames``, read with
``torch.from_dlpack``).

Writes its figures as JSON to --figures. Exit status: 0 the CUDA-path frames
equal the host-path frames; 1 they differ or a decode failed; 3 the client
has no CUDA path (``Client.decode`` takes no ``stream=``); 4 no CUDA device
or no torch with CUDA here; 2 bad command line.

``--mode long``: the worker that scripts/gpu/client_death.py kills in the
middle of its decode (check.sh's ipc_client_death step). It allocates a
seeded random float32 latent of --latent-shape and its uint8 output as CUDA
tensors with torch (the output shape from ``Client.plan``), writes its
figures (shapes, bytes) to --figures *before* it starts the decode (it is
not expected to live to write them again), prints ``ipc_worker: decoding``
and makes one decode into them on torch's current stream, tiles one per
decoder call (``stack_tiling="off"``) and, with --slow-tiles, each tile
call 50 ms late (``inject_faults=["slow_tiles"]``; the daemon must allow
fault injection), so that the decode lasts seconds even with the tiny
golden model. If the decode returns, the figures say how long it took and
the exit status is 5 (it was meant to be killed first); 3 and 4 as above.

``--mode ordering``: the device-side ordering rules of the daemon's CUDA
path (check.sh's ipc_ordering step), each against the host-path frames:

* a host latent with a CUDA ``output`` on a stream that is still busy
  (``torch.cuda._sleep``, then a poison fill of the output queued on it):
  the daemon's writes must wait for that fill (the client sends
  inputs_ready_event whenever a CUDA tensor is named), so the frames come
  out right; written before the fill, they would read as poison;
* the latent and the output carved out of one CUDA allocation, decoded by
  two clients of this process: the daemon maps the allocation once for
  both registrations (CUDA refuses a second mapping of one handle in a
  process), and both decodes give the host-path frames.
"""

import argparse
import inspect
import json
import os
import statistics
import sys
import time

EXIT_PASSED, EXIT_FAILED, EXIT_MISSING, EXIT_SKIPPED = 0, 1, 3, 4
EXIT_NOT_KILLED = 5  # --mode long: the decode ended before anyone killed this process
POISON = 0xAB  # written into the output before the decode


def write(path, figures):
    with open(path, "w") as f:
        json.dump(figures, f, indent=1)


def host_copies(info):
    """(field name, value) of the reply's host-copy count, or (None, None)."""
    for key in ("host_copies", "host_copy_bytes"):
        if key in info:
            return key, info[key]
    for section in ("timings", "io", "regions"):
        value = info.get(section)
        if isinstance(value, dict):
            for key in ("host_copies", "host_copy_bytes"):
                if key in value:
                    return f"{section}.{key}", value[key]
    return None, None


def decode_cuda(client, latent, out, o, stream):
    """One CUDA-path decode: (result, frames as a CUDA tensor)."""
    import torch
    kwargs = {"model": o.model, "stream": stream.cuda_stream}
    if out is not None:
        out.fill_(POISON)
        result = client.decode(latent, output=out, **kwargs)
        return result, out
    result = client.decode(latent, **kwargs)
    return result, torch.from_dlpack(result.frames)


def decode_managed(client, latent, expected, o, stream, figures):
    """The managed-buffer path (Client.alloc_latent(device=...)): whether its
    frames equal the host path's; None when the client has no such path."""
    import numpy as np
    import torch
    if "device" not in inspect.signature(client.alloc_latent).parameters:
        figures["managed"] = "Client.alloc_latent takes no device= (not built)"
        return None
    device = f"cuda:{torch.cuda.current_device()}"
    latent_buf = client.alloc_latent(tuple(latent.shape), np.float32, device=device)
    output_buf = client.alloc_latent(tuple(expected.shape), np.uint8, device=device)
    torch.as_tensor(latent_buf, device="cuda").copy_(latent)
    frames = torch.as_tensor(output_buf, device="cuda")
    frames.fill_(POISON)
    result = client.decode(latent_buf, output=output_buf, model=o.model,
                           stream=stream.cuda_stream)
    stream.synchronize()
    same = bool(torch.equal(frames.cpu(), expected))
    figures["managed_frames_equal_host_path"] = same
    figures["managed_host_copies"] = host_copies(result.info)[1]
    client.release_cuda()
    return same


def cuda_client_or_exit(figures):
    """(torch, vaed_client, Client.decode's parameters), or the exit status
    when this machine or client cannot decode CUDA tensors."""
    try:
        import torch
    except ImportError as e:
        figures["reason"] = f"no torch here: {e}"
        return EXIT_SKIPPED
    if not torch.cuda.is_available():
        figures["reason"] = "torch sees no CUDA device"
        return EXIT_SKIPPED
    import vaed_client

    parameters = inspect.signature(vaed_client.Client.decode).parameters
    if "stream" not in parameters:
        figures["reason"] = ("vaed_client.Client.decode has no stream= argument: this client "
                             "takes no CUDA tensors (CUDA tensor support not built yet)")
        return EXIT_MISSING
    return torch, vaed_client, parameters


def cuda_output_client_or_exit(figures):
    """cuda_client_or_exit, for a client whose decode also takes output=."""
    found = cuda_client_or_exit(figures)
    if isinstance(found, int):
        return found
    if "output" not in found[2]:
        figures["reason"] = "vaed_client.Client.decode has no output= argument"
        return EXIT_MISSING
    return found[0], found[1]


def run_long(o, figures):
    """--mode long: one long decode into this process's CUDA tensors."""
    found = cuda_output_client_or_exit(figures)
    if isinstance(found, int):
        return found
    torch, vaed_client = found
    shape = tuple(int(d) for d in o.latent_shape.split(","))
    figures.update({"mode": "long", "pid": os.getpid(), "device": torch.cuda.get_device_name(),
                    "latent_shape": list(shape), "slow_tiles": o.slow_tiles})
    generator = torch.Generator(device="cuda").manual_seed(o.seed)
    latent = torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32)
    stream = torch.cuda.current_stream()
    with vaed_client.Client(o.socket, client_name=o.client_name) as client:
        plan = client.plan(shape, model=o.model)
        out_shape = tuple(int(d) for d in plan["output_shape"])
        out = torch.empty(out_shape, dtype=torch.uint8, device="cuda")
        out.fill_(POISON)
        figures.update({"frames_shape": list(out_shape), "latent_bytes": latent.numel() * 4,
                        "output_bytes": out.numel()})
        write(o.figures, figures)  # now: this process is meant to die in the decode
        print(f"ipc_worker: decoding latent {list(shape)} into frames {list(out_shape)} "
              f"(pid {os.getpid()})", flush=True)
        faults = ["slow_tiles"] if o.slow_tiles else []
        t0 = time.perf_counter()
        client.decode(latent, output=out, model=o.model, stream=stream.cuda_stream,
                      stack_tiling="off", inject_faults=faults)
        stream.synchronize()
        figures["decode_returned_after_s"] = time.perf_counter() - t0
    figures["reason"] = ("the decode ended before this worker was killed: make it longer "
                         "(--latent-shape, --slow-tiles)")
    return EXIT_NOT_KILLED


def run(o, figures):
    found = cuda_client_or_exit(figures)
    if isinstance(found, int):
        return found
    torch, vaed_client, parameters = found
    import numpy as np
    figures["device"] = torch.cuda.get_device_name()
    latent_host = np.ascontiguousarray(vaed_client.read_safetensors(o.latent)[o.key])
    figures["latent_shape"] = list(latent_host.shape)
    stream = torch.cuda.current_stream()
    latent = torch.from_numpy(latent_host).to("cuda")  # the worker's own allocation
    with vaed_client.Client(o.socket, client_name=o.client_name) as client:
        host = client.decode(latent_host, model=o.model, copy=True)
        expected = torch.from_numpy(np.ascontiguousarray(host.frames))
        figures["frames_shape"] = list(expected.shape)
        out = None
        if "output" in parameters:
            out = torch.empty(tuple(expected.shape), dtype=torch.uint8, device="cuda")
        figures["output"] = "worker tensor (out=)" if out is not None else "client-managed buffer"
        result, frames = decode_cuda(client, latent, out, o, stream)
        stream.synchronize()
        got = frames.cpu()
        figures["inputs_in_place"] = result.inputs_in_place
        same = got.shape == expected.shape and torch.equal(got, expected)
        figures["frames_equal_host_path"] = bool(same)
        if got.shape == expected.shape:
            diff = (got.to(torch.int16) - expected.to(torch.int16)).abs()
            figures["max_abs_diff_vs_host_path"] = int(diff.max())
            figures["values_differing_vs_host_path"] = int((diff > 0).sum())
        field, copies = host_copies(result.info)
        figures["host_copies_field"] = field
        figures["host_copies"] = copies
        figures["peak_device_bytes"] = result.info.get("peak_device_bytes")
        figures["outputs_ready_event_sent"] = bool(result.info.get("outputs_ready_event"))
        round_trips, decodes = [], []
        for _ in range(o.iterations):
            t0 = time.perf_counter()
            result, _ = decode_cuda(client, latent, out, o, stream)
            stream.synchronize()
            round_trips.append(time.perf_counter() - t0)
            decodes.append(float(result.timings.get("decode", float("nan"))))
        rt, dec = statistics.median(round_trips), statistics.median(decodes)
        figures.update({"iterations": o.iterations, "round_trip_s_median": rt,
                        "daemon_decode_s_median": dec, "overhead_s": rt - dec,
                        "overhead_fraction_of_decode": (rt - dec) / dec if dec > 0 else None,
                        "warm": result.warm})
        try:
            managed = decode_managed(client, latent, expected, o, stream, figures)
        except Exception as e:  # the figures above still go out
            figures["managed"] = f"{type(e).__name__}: {e}"
            managed = False
    if not same:
        figures["reason"] = "CUDA-path frames differ from the host-path frames"
        return EXIT_FAILED
    if managed is False:
        figures["reason"] = "managed-buffer frames differ from the host-path frames"
        return EXIT_FAILED
    return EXIT_PASSED


def run_ordering(o, figures):
    """--mode ordering: see the module docstring."""
    found = cuda_output_client_or_exit(figures)
    if isinstance(found, int):
        return found
    torch, vaed_client = found
    import numpy as np
    figures.update({"mode": "ordering", "device": torch.cuda.get_device_name()})
    latent_host = np.ascontiguousarray(vaed_client.read_safetensors(o.latent)[o.key])
    stream = torch.cuda.current_stream()
    with vaed_client.Client(o.socket, client_name=o.client_name) as client:
        expected = torch.from_numpy(np.ascontiguousarray(
            client.decode(latent_host, model=o.model, copy=True).frames))
        # 1. Host latent, CUDA output, busy stream.
        out = torch.empty(tuple(expected.shape), dtype=torch.uint8, device="cuda")
        # A wait longer than the daemon's whole decode (the tiny golden model
        # decodes in well under a second): written without waiting for the
        # fill, the frames would be poisoned afterwards.
        torch.cuda._sleep(3_000_000_000)  # ~1.5 s of device time at ~2 GHz
        out.fill_(POISON)
        client.decode(latent_host, output=out, model=o.model, stream=stream.cuda_stream)
        stream.synchronize()
        busy_ok = bool(torch.equal(out.cpu(), expected))
        figures["host_latent_cuda_output_after_busy_stream_equal"] = busy_ok
        # 2. One allocation, two clients: latent and output in one segment.
        latent_bytes = latent_host.nbytes
        pool = torch.empty(latent_bytes + expected.numel(), dtype=torch.uint8, device="cuda")
        latent_dtype = torch.from_numpy(latent_host).dtype
        latent = pool[:latent_bytes].view(latent_dtype).view(latent_host.shape)
        latent.copy_(torch.from_numpy(latent_host))
        frames = pool[latent_bytes:].view(tuple(expected.shape))
        shared = []
        with vaed_client.Client(o.socket, client_name=o.client_name + "-2") as second:
            for c in (client, second):
                frames.fill_(POISON)
                c.decode(latent, output=frames, model=o.model, stream=stream.cuda_stream)
                stream.synchronize()
                shared.append(bool(torch.equal(frames.cpu(), expected)))
        figures["one_allocation_two_clients_equal"] = shared
    if not busy_ok:
        figures["reason"] = ("host latent + CUDA output: the frames differ after a busy stream "
                             "(the daemon wrote before the worker's queued work finished?)")
        return EXIT_FAILED
    if not all(shared):
        figures["reason"] = "one allocation, two clients: frames differ from the host path"
        return EXIT_FAILED
    return EXIT_PASSED


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("compare", "long", "ordering"), default="compare",
                   help="compare: CUDA path vs host path (default); long: one long decode, "
                        "to be killed in the middle (client_death.py); ordering: the "
                        "daemon's device-side ordering rules")
    p.add_argument("--socket", required=True)
    p.add_argument("--latent", help="safetensors file holding the latent (--mode compare)")
    p.add_argument("--key", default="latent")
    p.add_argument("--model", default="")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--latent-shape", default="1,24,32,48,48",
                   help="--mode long: the random latent's shape (default: 6 windows x 4x4 "
                        "tiles of the H3 video decoder)")
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--slow-tiles", action="store_true",
                   help="--mode long: inject_faults slow_tiles (50 ms before each tile call)")
    p.add_argument("--client-name", default="ipc-worker")
    p.add_argument("--figures", required=True)
    o = p.parse_args()
    if o.iterations < 1:
        p.error("--iterations must be at least 1")
    if o.mode in ("compare", "ordering") and not o.latent:
        p.error(f"--latent is required with --mode {o.mode}")
    if o.mode == "long":
        try:
            shape = [int(d) for d in o.latent_shape.split(",")]
        except ValueError:
            shape = []
        if len(shape) != 5 or min(shape) < 1:
            p.error(f"--latent-shape must be 5 positive integers, got '{o.latent_shape}'")
    figures = {}
    try:
        code = {"long": run_long, "ordering": run_ordering}.get(o.mode, run)(o, figures)
    except Exception as e:  # the figures gathered so far still go out
        figures["reason"] = f"{type(e).__name__}: {e}"
        code = EXIT_FAILED
    write(o.figures, figures)
    print("ipc_worker: " + json.dumps(figures), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
