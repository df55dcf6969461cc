"""vaed_client.integrations.vllm_omni against vLLM-Omni 0.30.0.

vLLM-Omni cannot be imported on a CPU machine with vaed's torch 2.11 (it
needs vllm, which needs its own torch): so its contract is read from the
package's own source, parsed with `ast` out of its PyPI wheel
(scripts/integration-env.sh downloads it), and the vaed side of our
pipeline classes (VaedH3Decoding, VaedChunkedVideo, importable without
vLLM-Omni) decodes through a real daemon, its outputs checked against that
contract and against the golden H3 outputs. What cannot run here:
vLLM-Omni's runtime (the pipeline classes themselves, decode_to_mp4's MP4
session), any GPU path.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import (GOLDEN_AUDIO_MAX_ABS, H3, PYTHON_DIR, assert_golden_f32, assert_golden_u8,
                      have_h3, need)

torch = pytest.importorskip("torch", reason="torch is absent: run under "
                                            "scripts/integration-env.sh's python")

import vllm_omni_source as src  # noqa: E402
import vaed_client  # noqa: E402
from vaed_client.integrations import vllm_omni as vaed_vllm  # noqa: E402
from vaed_client.integrations.vllm_omni_decoding import (  # noqa: E402
    AUDIO_SAMPLE_RATE, FPS, VaedChunkedVideo, VaedH3Decoding)

PIPELINE = src.H3 + "pipeline_minimax_h3.py"
VAE = src.H3 + "vae.py"
INTERFACE = "vllm_omni/diffusion/models/interface.py"
CHUNKED_VIDEO = "vllm_omni/diffusion/utils/chunked_video.py"


@pytest.fixture(scope="module")
def wheel():
    path = src.find_wheel()
    if path is None:
        pytest.skip(f"{src.WHEEL_NAME} is absent: run scripts/integration-env.sh (it downloads "
                    "it into <venv>/wheels) or set VAED_VLLM_OMNI_WHEEL")
    return path


def ours(function) -> list:
    return [(p.name, p.kind.name, src.NO_DEFAULT if p.default is p.empty else p.default)
            for p in inspect.signature(function).parameters.values()]


# -- the contract, read from the package's source -----------------------------

@pytest.mark.parametrize("method", ["decode", "decode_to_mp4"])
def test_decode_methods_have_the_pipelines_signature(wheel, method):
    theirs = src.params(src.find_function(
        src.find_class(src.module(wheel, PIPELINE), "MiniMaxH3Pipeline"), method))
    print(f"MiniMaxH3Pipeline.{method}{theirs}")
    assert ours(getattr(VaedH3Decoding, method)) == theirs


def test_chunked_producer_matches_the_protocol_and_h3s_value_range(wheel):
    protocol = src.find_class(src.module(wheel, INTERFACE), "SupportsChunkedVAEDecode")
    assert ours(VaedChunkedVideo.decode_with_chunks) == src.params(
        src.find_function(protocol, "decode_with_chunks"))
    h3_vae = src.find_class(src.module(wheel, VAE), "MiniMaxH3VideoVAE")
    assert ours(VaedChunkedVideo.decode_with_chunks) == src.params(
        src.find_function(h3_vae, "decode_with_chunks"))
    assert VaedChunkedVideo.chunk_value_range == src.class_attribute(h3_vae, "chunk_value_range")
    # What vLLM-Omni's consumer uses of a producer.
    consumer = src.find_function(src.module(wheel, CHUNKED_VIDEO), "decode_to_mp4")
    assert ("decode_with_chunks", ["on_chunk"]) in src.attribute_calls(consumer)


def test_decode_to_mp4_drives_the_consumer_as_the_package_does(wheel):
    """Ours passes vLLM-Omni's chunked_video.decode_to_mp4 the keywords the
    package's own decode_to_mp4 passes it."""
    theirs = src.find_function(src.find_class(src.module(wheel, PIPELINE), "MiniMaxH3Pipeline"),
                               "decode_to_mp4")
    theirs_calls = [node for node in src.ast.walk(theirs) if isinstance(node, src.ast.Call)
                    and getattr(node.func, "id", None) == "decode_chunks_to_mp4"]
    assert len(theirs_calls) == 1
    ours_tree = src.ast.parse(textwrap.dedent(inspect.getsource(VaedH3Decoding.decode_to_mp4)))
    ours_keywords = {kw for name, kws in src.attribute_calls(ours_tree.body[0])
                     if name == "decode_to_mp4" for kw in kws}
    assert ours_keywords == {k.arg for k in theirs_calls[0].keywords}


def test_constants_equal_the_packages(wheel):
    tree = src.module(wheel, PIPELINE)
    assert FPS == src.constant(tree, "MINIMAX_H3_FPS")
    assert AUDIO_SAMPLE_RATE == src.constant(tree, "MINIMAX_H3_AUDIO_SAMPLE_RATE")


@pytest.mark.parametrize("vae_class", ["MiniMaxH3VideoVAE", "MiniMaxH3AudioVAE"])
def test_vae_stand_in_takes_what_the_pipeline_passes(wheel, vae_class):
    """The pipeline builds its VAEs through module-level names that the
    subclass replaces during construction: the replacement takes the
    class's own parameters, and the pipeline asks for decode-only ones."""
    init = src.find_function(src.find_class(src.module(wheel, VAE), vae_class), "__init__")
    factory = vaed_vllm._vae_factory(object, object)
    assert ours(factory) == src.params(init)[1:]  # less self
    pipeline = src.module(wheel, PIPELINE)
    assert vae_class in src.imported_names(pipeline, "vae")
    calls = [node for node in src.ast.walk(src.find_function(
        src.find_class(pipeline, "MiniMaxH3Pipeline"), "__init__"))
        if isinstance(node, src.ast.Call) and getattr(node.func, "id", None) == vae_class]
    assert len(calls) == 1 and "decode_only" in {k.arg for k in calls[0].keywords}


def test_pipeline_classes_without_vllm_omni_say_what_to_install():
    """Here vLLM-Omni is not installed: the class names raise ImportError
    naming it (in a child, so that nothing is half-imported here)."""
    code = ("import vaed_client.integrations.vllm_omni as v\n"
            "for name in ('MiniMaxH3VaedPipeline', 'MiniMaxH3VaedDecoderPipeline'):\n"
            "    try:\n        getattr(v, name)\n"
            "    except ImportError as e:\n        print(name, 'ImportError:', e)\n"
            "    else:\n        print(name, 'BUILT')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(PYTHON_DIR)}, timeout=120)
    print(out.stdout + out.stderr)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    if lines[0].endswith("BUILT"):
        pytest.skip("vllm_omni imports here: the pipeline classes were built")
    assert "pip install vllm-omni" in lines[0]
    assert "newer than 0.30.0" in lines[1]


def test_the_package_itself_cannot_be_imported_on_this_machine(wheel):
    """Records exactly what fails when vLLM-Omni 0.30.0's MiniMax-H3
    pipeline module is imported from its wheel here: the first of its
    unmet dependencies (it needs vllm, which brings its own torch, and pins
    diffusers 0.40.0 and transformers < 5.15, which the diffusers tests'
    0.42.1 and 5.25.0 contradict)."""
    code = (f"import sys; sys.path.insert(0, {str(wheel)!r})\n"
            "import vllm_omni.diffusion.models.minimax_h3.pipeline_minimax_h3\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    last = (out.stderr.strip().splitlines() or ["(no error)"])[-1]
    print(f"importing vLLM-Omni's pipeline module: exit {out.returncode}: {last}")
    if out.returncode == 0:
        pytest.skip("vLLM-Omni's pipeline module imports here")
    assert last.startswith("ModuleNotFoundError")


# -- the vaed side, through a running daemon ----------------------------------

@pytest.fixture(scope="module")
def golden():
    if not have_h3():
        pytest.skip("the golden H3 models are absent (../shared)")
    video = vaed_client.read_safetensors(need(H3 / "video_case_two_windows_two_tiles.safetensors"))
    audio = vaed_client.read_safetensors(need(H3 / "audio_case_stereo.safetensors"))
    return video, audio


@pytest.fixture
def pipeline(daemon):
    decoding = VaedH3Decoding()
    decoding.vaed_socket = daemon.socket
    return decoding


def quantise(video) -> np.ndarray:
    """vLLM-Omni's own quantiser (_prepare_minimax_h3_video_output):
    clamp(0, 1) * 255, round, uint8, [B, F, H, W, C]."""
    frames = video.float().clamp(0, 1).mul(255).round().permute(0, 2, 3, 4, 1)
    return frames.to(torch.uint8)[0].numpy()


def test_decode_matches_the_contract_and_the_golden(pipeline, golden):
    video_case, audio_case = golden
    latent = torch.from_numpy(video_case["latent"].copy())   # [1, 24, 12, 16, 17], normalised
    audio_latent = torch.from_numpy(audio_case["latent"].copy())  # [2, 32, 40], stereo as batch
    video, audio = pipeline.decode(latent, audio_latent, height=240, width=272)
    assert (video.dtype, video.device.type, tuple(video.shape)) == (torch.float32, "cpu",
                                                                   (1, 3, 39, 240, 272))
    assert (audio.dtype, audio.device.type, tuple(audio.shape)) == (torch.float32, "cpu",
                                                                   (1, 2, 40 * 800))
    assert float(video.min()) >= 0.0 and float(video.max()) <= 1.0 and video.is_contiguous()
    assert float(audio.abs().max()) <= 1.0
    full, _ = pipeline.decode(latent, audio_latent, height=256, width=272)
    assert torch.equal(video, full[..., :240, :])
    assert_golden_u8("decode video, quantised as vLLM-Omni does", quantise(full),
                     video_case["frames_u8"])
    assert_golden_f32("decode audio [1, 2, S]", audio.numpy(),
                      audio_case["waveform_stereo_1x2xN"], GOLDEN_AUDIO_MAX_ABS)


def test_chunked_decode_streams_what_decode_returns(pipeline, golden):
    video_case, audio_case = golden
    latent = torch.from_numpy(video_case["latent"].copy())
    full, _ = pipeline.decode(latent, torch.from_numpy(audio_case["latent"].copy()),
                              height=256, width=272)
    chunks = []
    VaedChunkedVideo(pipeline.vaed_client()).decode_with_chunks(latent, on_chunk=chunks.append)
    print(f"chunks: {[tuple(c.shape) for c in chunks]}")
    low, high = VaedChunkedVideo.chunk_value_range
    assert len(chunks) == 2  # two temporal windows: frames [0, 17) then [17, 39)
    for chunk in chunks:
        assert chunk.dtype == torch.float32 and chunk.dim() == 5 and chunk.shape[:2] == (1, 3)
        assert float(chunk.min()) >= low and float(chunk.max()) <= high
    assert torch.equal(torch.cat(chunks, dim=2), full)


def test_chunk_callback_error_is_raised_after_the_decode_drains(pipeline, golden):
    video_case, audio_case = golden
    latent = torch.from_numpy(video_case["latent"].copy())
    calls = []

    def fail(chunk):
        calls.append(chunk.shape[2])
        raise RuntimeError("consumer failed")

    with pytest.raises(RuntimeError, match="consumer failed"):
        VaedChunkedVideo(pipeline.vaed_client()).decode_with_chunks(latent, on_chunk=fail)
    assert calls == [17]  # no call after the failure
    with pytest.raises(TypeError):
        VaedChunkedVideo(pipeline.vaed_client()).decode_with_chunks(latent, on_chunk=None)
    video, _ = pipeline.decode(latent, torch.from_numpy(audio_case["latent"].copy()),
                               height=256, width=272)  # the client decodes again
    assert video.shape[2] == 39


def test_decode_to_mp4_needs_vllm_omnis_mp4_session(pipeline, golden):
    video_case, audio_case = golden
    try:
        pipeline.decode_to_mp4(torch.from_numpy(video_case["latent"].copy()),
                               torch.from_numpy(audio_case["latent"].copy()),
                               height=256, width=272)
    except ImportError as e:
        print(f"decode_to_mp4 did not run: {e}")
        assert "vllm_omni" in str(e) and "pip install vllm-omni" in str(e)
        pytest.skip("decode_to_mp4 needs vLLM-Omni's chunked_video (not importable here)")


class InterleavingClient:
    """A shared Client on which another thread's decode (of `other`) runs
    in the window between each decode's reply and the integration's use of
    its outputs: deterministically, right after the wrapped call returns
    (decode) or once the wrapped stream's decode has ended (decode_stream).
    With outputs that view the client's region, the integration would see
    `other`'s frames."""

    def __init__(self, client, other):
        self.client, self.other = client, other

    def __getattr__(self, name):
        return getattr(self.client, name)

    def decode(self, *args, **kwargs):
        result = self.client.decode(*args, **kwargs)
        self.client.decode(self.other, model="h3", format="float32_unit")
        return result

    def decode_stream(self, *args, **kwargs):
        parts = list(self.client.decode_stream(*args, **kwargs))
        self.client.decode(self.other, model="h3", format="float32_unit")
        yield from parts


def test_regression_another_threads_decode_cannot_overwrite_the_outputs(daemon, golden):
    """Regression: the integrations took decode outputs that view the shared
    Client's output region and copied them after the Client was released,
    so a decode from another thread could overwrite them first (frames of
    another latent returned, max difference 0.76)."""
    from vaed_client.integrations import h3_decode
    video_case, audio_case = golden
    latent = torch.from_numpy(video_case["latent"].copy())
    audio_latent = torch.from_numpy(audio_case["latent"].copy())
    other = -video_case["latent"]
    with vaed_client.Client(daemon.socket) as plain, vaed_client.Client(daemon.socket) as shared:
        expected = plain.decode(video_case["latent"], model="h3", format="float32_unit",
                                copy=True).frames
        client = InterleavingClient(shared, other)
        video, _, _ = h3_decode.decode_av(client, latent, audio_latent)
        assert np.array_equal(video[0].permute(1, 0, 2, 3).numpy(), expected)
        chunks = []
        h3_decode.stream_video(client, latent, chunks.append)
        streamed = torch.cat(chunks, dim=2)[0].permute(1, 0, 2, 3).numpy()
        assert np.array_equal(streamed, expected)


def test_latents_that_are_not_floating_tensors_are_refused_naming_the_argument(pipeline, golden):
    video_case, audio_case = golden
    latent = torch.from_numpy(video_case["latent"].copy())
    audio_latent = torch.from_numpy(audio_case["latent"].copy())
    with pytest.raises(TypeError, match="audio_latent must have a floating dtype"):
        pipeline.decode(latent, audio_latent.to(torch.int64), height=256, width=272)
    with pytest.raises(TypeError, match="video_latent must be a torch.Tensor"):
        pipeline.decode(video_case["latent"], audio_latent, height=256, width=272)


@pytest.mark.parametrize("height,width", [(257, 272), (256, 273), (0, 272), (-16, 272),
                                          (256.0, 272)])
def test_a_crop_outside_the_decoded_frames_is_refused_before_decoding(pipeline, golden, height,
                                                                      width):
    video_case, audio_case = golden
    with pytest.raises(ValueError, match="height|width") as refused:
        pipeline.decode(torch.from_numpy(video_case["latent"].copy()),
                        torch.from_numpy(audio_case["latent"].copy()), height=height,
                        width=width)
    assert "256 x 272 px" in str(refused.value)


def test_ranks_other_than_the_output_owner_do_not_decode(pipeline, golden, monkeypatch):
    from vaed_client.integrations import vllm_omni_decoding
    video_case, audio_case = golden
    latent = torch.from_numpy(video_case["latent"].copy())
    audio_latent = torch.from_numpy(audio_case["latent"].copy())
    owner, _ = pipeline.decode(latent, audio_latent, height=240, width=272)
    monkeypatch.setattr(vllm_omni_decoding, "is_output_owner_rank", lambda: False)
    client = pipeline.vaed_client()

    class PlanOnly:
        """The client a peer rank may use: plans, never decodes."""
        plan = staticmethod(client.plan)

        def decode(self, *args, **kwargs):
            raise AssertionError("a peer rank asked vaed to decode")

        decode_stream = decode

    monkeypatch.setattr(pipeline, "vaed_client", lambda: PlanOnly())
    video, audio = pipeline.decode(latent, audio_latent, height=240, width=272)
    assert (video.shape, video.dtype) == (owner.shape, owner.dtype)
    assert tuple(audio.shape) == (1, 2, 40 * 800) and audio.dtype == torch.float32
    assert pipeline.decode_to_mp4(latent, audio_latent, height=240, width=272) == b""


def test_the_owner_rank_is_rank_0_of_a_distributed_run(monkeypatch):
    from vaed_client.integrations import vllm_omni_decoding
    dist = torch.distributed
    assert vllm_omni_decoding.is_output_owner_rank()  # no distributed run here
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    assert not vllm_omni_decoding.is_output_owner_rank()
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    assert vllm_omni_decoding.is_output_owner_rank()


def test_decoder_stage_resolvers_of_both_vllm_omni_revisions_are_replaced():
    import types
    old = types.SimpleNamespace(__name__="old", _resolve_decoder_model_path=None)
    new = types.SimpleNamespace(__name__="new", resolve_minimax_h3_decoder_model_path=None)
    for module in (old, new):
        (name, resolver), = vaed_vllm._decoder_resolvers(module).items()
        assert hasattr(module, name)
    config = types.SimpleNamespace(model="/models/MiniMax-H3")
    assert str(vaed_vllm._model_path_as_given(config)) == "/models/MiniMax-H3"
    assert str(vaed_vllm._model_path_as_given("/models/MiniMax-H3", None, "t2va")) == \
        "/models/MiniMax-H3"
    with pytest.raises(ImportError, match="resolves its VAE checkpoint"):
        vaed_vllm._decoder_resolvers(types.SimpleNamespace(__name__="unknown"))


# -- what the subclasses do at construction, without vLLM-Omni ----------------

def test_vae_factory_builds_encoders_or_weightless_placeholders():
    built = []

    class Recorder:
        def __init__(self, component_path, **kwargs):
            built.append((component_path, kwargs))

    placeholder = vaed_vllm._placeholder_vae_class(torch.nn)
    make = vaed_vllm._vae_factory(Recorder, placeholder)
    stand_in = make("/ckpt/video_vae", device="cpu", decode_only=True, trust_remote_code=False)
    assert isinstance(stand_in, torch.nn.Module) and not list(stand_in.parameters())
    assert stand_in.decoder_component is stand_in and not stand_in.is_distributed_enabled()
    with pytest.raises(RuntimeError, match="vaed"):
        stand_in.decode_latent(torch.zeros(1))
    assert built == []
    make("/ckpt/video_vae", device="cpu", load_device="cpu", trust_remote_code=True)
    assert built == [("/ckpt/video_vae", {"device": "cpu", "load_device": "cpu",
                                          "encode_only": True, "trust_remote_code": True})]


def test_patched_names_are_restored_even_after_an_error():
    import types
    module = types.SimpleNamespace(MiniMaxH3VideoVAE="video", MiniMaxH3AudioVAE="audio")
    with pytest.raises(KeyError):
        with vaed_vllm._patched(module, MiniMaxH3VideoVAE="stand-in"):
            assert module.MiniMaxH3VideoVAE == "stand-in"
            raise KeyError("constructor failed")
    assert (module.MiniMaxH3VideoVAE, module.MiniMaxH3AudioVAE) == ("video", "audio")


def test_vaed_settings_come_from_custom_pipeline_args():
    import types
    from vaed_client.integrations.vllm_omni_decoding import vaed_settings
    config = types.SimpleNamespace(custom_pipeline_args={
        "pipeline_class": "vaed_client.integrations.vllm_omni.MiniMaxH3VaedPipeline",
        "vaed_socket": "/run/vaed/other.sock", "vaed_model": "h3-fl2va"})
    assert vaed_settings(config) == {"socket": "/run/vaed/other.sock", "model": "h3-fl2va"}
    assert vaed_settings(types.SimpleNamespace()) == {"socket": None, "model": "h3"}
