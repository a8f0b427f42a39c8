"""Parameters of the vendor designer's model files that mean something LayerLab spells differently (docs/model-files.md, "Vendor
model files"). Names that only differ are legacy names in the descriptors (``apply_bias`` of convolution is ``bias``);
values with another meaning are mapped here."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ParamDesc
from engine.layer import Layer

#: space_to_depth / depth_to_space ``dominant`` (the vendor's name of ``mode``): pixel-dominant orders the output
#: channels by pixel offset first (DCR), channel-dominant by input channel first (CRD)
DOMINANT_MODES = {"pixel": "DCR", "channel": "CRD"}
#: the ``mode`` values of space_to_depth / depth_to_space: LayerLab's, then the vendor's ``dominant`` values
SHUFFLE_MODES = ("DCR", "CRD", *DOMINANT_MODES)


#: the parameters of space_to_depth and depth_to_space, and their documentation (the end of a list)
SHUFFLE_PARAMS = (
    ParamDesc("block_size", "uint", 2, "block size b", min=1, max=64, main=True, legacy_names=("blocksize",)),
    ParamDesc("mode", "enum", "DCR", "channel ordering (the vendor's dominant: pixel = DCR, channel = CRD)",
              enum_values=SHUFFLE_MODES, legacy_names=("dominant",)),
)
SHUFFLE_PARAMS_DOC = ("<li><b>block_size</b>: b, default 2, 1..64.</li>"
                      "<li><b>mode</b>: DCR or CRD, default DCR.</li></ul>")


def shuffle_mode(params: dict[str, Any]) -> None:
    """Replace a vendor ``dominant`` value of ``mode`` by LayerLab's (in place)."""
    params["mode"] = DOMINANT_MODES.get(params["mode"], params["mode"])


class ShuffleLayer(Layer):
    """What space_to_depth and depth_to_space share: a vendor model's ``dominant`` mode read as LayerLab's."""

    def validate(self) -> None:
        shuffle_mode(self.p)
