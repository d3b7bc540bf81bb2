"""Wire-protocol decoders: pure and incremental, bytes in, engine inputs out.

``DECODERS`` names every protocol; :func:`make_decoder` builds one from its
settings mapping (validated, unknown keys refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from drivers.protocols.angel_eye import AngelEyeDecoder, AngelEyeSettings
from drivers.protocols.ascii_lines import AsciiLineDecoder, AsciiLineSettings
from drivers.protocols.frames import DecodedFrame, Decoder
from drivers.protocols.hid_wedge import HidWedgeDecoder, HidWedgeSettings


@dataclass(frozen=True, slots=True)
class DecoderSpec:
    """A protocol's decoder class and its settings model."""

    decoder: type[AngelEyeDecoder | AsciiLineDecoder | HidWedgeDecoder]
    settings: type[BaseModel]


DECODERS: dict[str, DecoderSpec] = {
    "angel_eye": DecoderSpec(AngelEyeDecoder, AngelEyeSettings),
    "ascii_lines": DecoderSpec(AsciiLineDecoder, AsciiLineSettings),
    "usb_hid": DecoderSpec(HidWedgeDecoder, HidWedgeSettings),
}


def make_decoder(
    protocol: str, settings: Mapping[str, Any] | BaseModel | None = None, *, device: str = "reader"
) -> Decoder:
    """Build the decoder for ``protocol`` (a key of :data:`DECODERS`).

    Raises ``KeyError`` naming the known protocols, or pydantic's
    ``ValidationError`` naming the bad setting.
    """
    spec = DECODERS.get(protocol)
    if spec is None:
        raise KeyError(f"unknown protocol {protocol!r}; known: {', '.join(sorted(DECODERS))}")
    if settings is None:
        model = spec.settings()
    elif isinstance(settings, BaseModel):
        model = spec.settings.model_validate(settings.model_dump())
    else:
        model = spec.settings.model_validate(dict(settings))
    return spec.decoder(model, device=device)  # type: ignore[arg-type]


__all__ = ["DECODERS", "DecodedFrame", "Decoder", "DecoderSpec", "make_decoder"]
