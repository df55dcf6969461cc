"""CUDA arrays through vaed_client without a GPU: stand-in
objects exposing ``__cuda_array_interface__`` or ``__dlpack_device__`` ==
(kDLCUDA, 0) are checked (each error names the argument and the rule) and
refused by a daemon with no CUDA ranks before anything is exported. Nothing
here touches CUDA: the stand-ins' pointers are never dereferenced, and
``__dlpack__`` must not be called.

The path with a GPU (registering the allocation, stream-ordered events) is
unrun here; see docs/gpu.md."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import vaed_client
from conftest import PYTHON_DIR


def cai(shape=(1, 32, 8, 8), typestr="<f4", ptr=0x7F0000000000, readonly=False, version=3,
        **extra):
    """A __cuda_array_interface__ dict (version 3 unless told)."""
    interface = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly),
                 "version": version, "strides": None, "stream": 1}
    interface.update(extra)
    return interface


class FakeCudaArray:
    """What CuPy / numba / torch CUDA tensors expose; nothing else."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


class FakeCudaDLPack:
    """A DLPack producer on CUDA device 0 that must not be exported."""

    def __dlpack__(self, stream=None):
        raise AssertionError("__dlpack__ must not be called: the daemon has no CUDA ranks")

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0


def expect_no_cuda_ranks(call, field_name):
    with pytest.raises(vaed_client.ValidationError) as e:
        call()
    assert e.value.code_name == "failed_precondition", e.value
    assert "this daemon has no CUDA ranks" in e.value.message, e.value
    assert e.value.message.startswith(f"{field_name}: a CUDA tensor"), e.value
    return e.value


def test_a_cpu_daemon_lists_no_cuda_devices(client):
    assert client.cuda_devices == []
    assert client.hello().get("cuda_devices", []) == []


def test_a_cuda_latent_is_refused_by_a_daemon_without_cuda_ranks(client):
    err = expect_no_cuda_ranks(
        lambda: client.decode(FakeCudaArray(cai()), model="demo"), "video_latent")
    assert "__cuda_array_interface__" in err.message
    assert "tensor.cpu()" in err.message
    expect_no_cuda_ranks(
        lambda: client.decode(FakeCudaDLPack(), model="demo"), "video_latent")
    audio = FakeCudaArray(cai(shape=(1, 32, 40)))
    expect_no_cuda_ranks(
        lambda: client.decode(audio_latent=audio, model="demo"), "audio_latent")


def test_a_cuda_output_is_refused_by_a_daemon_without_cuda_ranks(client):
    latent = np.zeros((1, 32, 8, 8), dtype=np.float32)
    out = FakeCudaArray(cai(shape=(1, 64, 64, 3), typestr="|u1"))
    err = expect_no_cuda_ranks(lambda: client.decode(latent, model="demo", output=out), "output")
    assert "__cuda_array_interface__" in err.message
    err = expect_no_cuda_ranks(
        lambda: client.decode(latent, model="demo", output=FakeCudaDLPack()), "output")
    assert "DLPack kDLCUDA" in err.message


def test_the_refusal_registers_nothing_and_the_client_goes_on(client):
    before = client.status()
    with pytest.raises(vaed_client.ValidationError):
        client.decode(FakeCudaArray(cai()), model="demo")
    x = np.random.default_rng(3).standard_normal((1, 32, 8, 8), dtype=np.float32)
    r = client.decode(x, model="demo")
    assert r.frames.shape == (1, 64, 64, 3)
    assert client._regions.cuda == {}
    assert client.status().get("clients") is not None and before is not None


@pytest.mark.parametrize("interface, rule", [
    (cai(strides=(4, 4, 4, 4)), "['strides'] (4, 4, 4, 4) is not C-contiguous"),
    (cai(shape=(2, 3), strides=(4, 8)), "['strides'] (4, 8) is not C-contiguous"),
    (cai(typestr="<f8"), "['typestr'] '<f8' is not one vaed takes"),
    (cai(typestr=">f4"), "['typestr'] '>f4' is not one vaed takes"),
    (cai(typestr="<i4"), "['typestr'] '<i4' is not one vaed takes"),
    ({"shape": (1, 32, 8, 8), "data": (1, False), "version": 3}, "has no 'typestr'"),
    ({"typestr": "<f4", "data": (1, False), "version": 3}, "has no 'shape'"),
    ({"shape": (1, 32, 8, 8), "typestr": "<f4", "version": 3}, "has no 'data'"),
    ({"shape": (1, 32, 8, 8), "typestr": "<f4", "data": (1, False)}, "has no 'version'"),
    (cai(version=1), "['version'] is 1; vaed reads versions 2 and 3"),
    (cai(ptr=0), "['data'][0] is 0, not a device pointer"),
    (cai(stream=0), "['stream'] is 0, which the interface forbids"),
    (cai(shape=(1, 0, 8)), "has a zero dim"),
    (cai(mask=object()), "['mask'] is set"),
])
def test_bad_cuda_array_interfaces_name_the_field_and_the_rule(client, interface, rule):
    with pytest.raises(vaed_client.ValidationError) as e:
        client.decode(FakeCudaArray(interface), model="demo")
    assert e.value.code_name == "invalid_argument", e.value
    assert e.value.message.startswith("video_latent: __cuda_array_interface__"), e.value
    assert rule in e.value.message, e.value


def test_good_cuda_array_interfaces_pass_the_checks(client):
    # C-contiguous strides spelled out, size-1 dims with any stride, version
    # 2 (no stream), float16 and uint8: all get as far as the daemon's
    # CUDA-rank check.
    for interface in (cai(strides=(32 * 8 * 8 * 4, 8 * 8 * 4, 8 * 4, 4)),
                      cai(shape=(1, 32, 1, 8), strides=(999, 32, 7, 4)),
                      {"shape": (1, 32, 8, 8), "typestr": "<f4", "data": (64, False),
                       "version": 2},
                      cai(typestr="<f2"), cai(typestr="|u1")):
        expect_no_cuda_ranks(lambda: client.decode(FakeCudaArray(interface), model="demo"),
                             "video_latent")


def test_bad_output_arguments(client):
    latent = np.zeros((1, 32, 8, 8), dtype=np.float32)
    with pytest.raises(vaed_client.ValidationError, match="output: takes a CUDA array"):
        client.decode(latent, model="demo", output=np.zeros((1, 64, 64, 3), np.uint8))
    with pytest.raises(vaed_client.ValidationError,
                       match=r"output: __cuda_array_interface__\['typestr'\]"):
        client.decode(latent, model="demo", output=FakeCudaArray(cai(typestr="<i8")))
    with pytest.raises(vaed_client.ValidationError, match="stream is 0"):
        client.decode(latent, model="demo", stream=0)


def test_plan_takes_a_cuda_array_for_its_shape(client):
    plan = client.plan(FakeCudaArray(cai(shape=(2, 32, 8, 8))), model="demo")
    assert plan["output_shape"] == [2, 64, 64, 3]


def test_release_cuda_of_an_array_never_registered(client):
    assert client.release_cuda(FakeCudaArray(cai())) == 0
    assert client.release_cuda() == 0
    with pytest.raises(vaed_client.ValidationError, match="not a CUDA array"):
        client.release_cuda(np.zeros(4, np.float32))


def test_cuda_arrays_are_checked_without_importing_torch(daemon):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(PYTHON_DIR)!r})
        import vaed_client
        class FakeCudaArray:
            __cuda_array_interface__ = {{"shape": (1, 32, 8, 8), "typestr": "<f4",
                                        "data": (4096, False), "version": 3}}
        with vaed_client.Client({daemon.socket!r}) as c:
            try:
                c.decode(FakeCudaArray(), model="demo")
            except vaed_client.ValidationError as e:
                print(e.code_name, "no CUDA ranks" in e.message)
        print("torch" in sys.modules)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["failed_precondition", "True", "False"], run.stdout


# --- managed device buffers: alloc_latent(device="cuda:N") ------------------

def test_alloc_latent_on_a_device_is_refused_by_a_daemon_without_cuda_ranks(client):
    with pytest.raises(vaed_client.ValidationError) as e:
        client.alloc_latent((1, 32, 8, 8), device="cuda:0")
    assert e.value.code_name == "failed_precondition", e.value
    assert e.value.message.startswith("alloc_latent: device cuda:0; this daemon has no CUDA "
                                      "ranks"), e.value
    # The host path is unchanged.
    assert isinstance(client.alloc_latent((1, 32, 8, 8)), np.ndarray)


@pytest.mark.parametrize("device", ["gpu:0", "cuda:", "cuda:x", "cuda:-1", 0, None])
def test_alloc_latent_names_a_bad_device(client, device):
    with pytest.raises(vaed_client.ValidationError) as e:
        client.alloc_latent((1, 32, 8, 8), device=device)
    assert e.value.code_name == "invalid_argument", e.value
    assert e.value.message.startswith(f"alloc_latent: device {device!r} must be"), e.value


def test_the_library_allocator_checks_its_arguments_before_the_driver():
    core = vaed_client._core
    with pytest.raises(vaed_client.ValidationError) as e:
        core.CudaBuffer.allocate(0, 0)
    assert "bytes is 0" in e.value.message, e.value
    with pytest.raises(vaed_client.ValidationError) as e:
        core.CudaBuffer.allocate(-1, 16)
    assert "device ordinal is -1" in e.value.message, e.value


def test_the_library_allocator_says_when_the_machine_has_no_driver():
    try:
        vaed_client._core.CudaBuffer.allocate(0, 16)
    except vaed_client.ValidationError as e:
        if "no NVIDIA driver" not in e.message:
            raise
        assert e.code_name == "failed_precondition", e
        return
    pytest.skip("this machine has an NVIDIA driver and a device")


class FakeBuffer:
    """What vaed_client._core.CudaBuffer gives a CudaArray (never dereferenced)."""
    ptr = 0x7F0000001000
    device_uuid = "GPU-00000000-0000-0000-0000-000000000000"


def test_a_cuda_array_describes_its_memory_as_cuda_array_interface_v3():
    a = vaed_client.CudaArray(FakeBuffer(), (1, 24, 7, 16, 16), np.float32, 0)
    assert a.__cuda_array_interface__ == {
        "shape": (1, 24, 7, 16, 16), "typestr": "<f4", "data": (0x7F0000001000, False),
        "version": 3, "strides": None, "stream": None}
    assert a.nbytes == 24 * 7 * 16 * 16 * 4
    assert a.device == "cuda:0" and a.device_uuid == FakeBuffer.device_uuid


def test_a_cuda_array_goes_the_cuda_path_of_decode(client):
    a = vaed_client.CudaArray(FakeBuffer(), (1, 32, 8, 8), np.float32, 0)
    expect_no_cuda_ranks(lambda: client.decode(a, model="demo"), "video_latent")
