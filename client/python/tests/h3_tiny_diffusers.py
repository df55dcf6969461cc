"""Tiny MiniMax-H3 VAEs built with diffusers (AutoencoderKLMiniMaxH3 and
AutoencoderKLMiniMaxH3Audio) from small configs and seeded weights, saved
in diffusers' layout for a vaed daemon to serve: a second, independent
reference implementation of the H3 decoders for the integration tests.
Needs torch and diffusers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Tuple

# Video: 16 px per latent cell and 24 latent channels (as released; vaed
# checks both),
# one ViT block of width 8. Audio: the released rates (800 samples per
# latent frame), decoder width 128 instead of 1024.
VIDEO_CONFIG = dict(latent_channels=24, block_out_channels=(8,) * 6, layers_per_block=1,
                    norm_num_groups=4, decoder_num_layers=1, decoder_num_attention_heads=1,
                    decoder_attention_head_dim=8, decoder_num_register_tokens=1,
                    decoder_ffn_mult=1)
AUDIO_CONFIG = dict(encoder_dim=4, latent_dim=128, num_attention_heads=2, decoder_dim=128)
AUDIO_LATENT_CHANNELS = 32


def _stats(torch: Any, generator: Any, channels: int) -> Tuple[List[float], List[float]]:
    """Seeded latents mean in [-0.5, 0.5) and std in [0.5, 2)."""
    mean = torch.rand(channels, generator=generator) - 0.5
    std = torch.rand(channels, generator=generator) * 1.5 + 0.5
    return [float(x) for x in mean], [float(x) for x in std]


def reinit_(torch: Any, model: Any, generator: Any) -> None:
    """Seeded values for every parameter, in named_parameters order: weight
    norm magnitudes U(0.4, 1.2); other tensors of rank >= 2 N(0, 1/fan_in);
    rank-1 weights (norms) 1 + N(0, 0.01); other rank-1 tensors (biases,
    layer scales, snake alpha/beta) N(0, 0.01)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if name.endswith("weight_g"):
                p.copy_(torch.rand(p.shape, generator=generator) * 0.8 + 0.4)
            elif p.dim() >= 2:
                p.copy_(noise / max(p[0].numel(), 1) ** 0.5)
            elif name.endswith("weight"):
                p.copy_(1 + 0.1 * noise)
            else:
                p.copy_(0.1 * noise)


def build(seed: int = 0) -> Tuple[Any, Any]:
    """(video VAE, audio VAE), float32, eval mode, seeded from `seed`."""
    import torch
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio
    generator = torch.Generator().manual_seed(seed)
    video_mean, video_std = _stats(torch, generator, VIDEO_CONFIG["latent_channels"])
    audio_mean, audio_std = _stats(torch, generator, AUDIO_LATENT_CHANNELS)
    video = AutoencoderKLMiniMaxH3(**VIDEO_CONFIG, latents_mean=video_mean, latents_std=video_std)
    audio = AutoencoderKLMiniMaxH3Audio(**AUDIO_CONFIG, latent_channels=AUDIO_LATENT_CHANNELS,
                                        latents_mean=audio_mean, latents_std=audio_std)
    reinit_(torch, video, generator)
    reinit_(torch, audio, generator)
    return video.eval(), audio.eval()


def save(video: Any, audio: Any, root: Path) -> str:
    """Saves both in diffusers' layout (root/vae, root/audio_vae); returns
    the vaed ``--model`` value serving them as model "h3"."""
    video.save_pretrained(root / "vae")
    audio.save_pretrained(root / "audio_vae")
    files = [root / "vae" / "diffusion_pytorch_model.safetensors", root / "vae" / "config.json",
             root / "audio_vae" / "diffusion_pytorch_model.safetensors",
             root / "audio_vae" / "config.json"]
    return "h3=h3:" + ":".join(str(f) for f in files)
