"""Parameters of the vendor designer's model files that mean something LayerLab spells differently (docs/model-files.md, "Vendor
model files"). Names that only differ are legacy names in the descriptors (``apply_bias`` of convolution is ``bias``);
values with another meaning are mapped here."""
from __future__ import annotations

from typing import Any

#: space_to_depth / depth_to_space ``dominant`` (the vendor's name of ``mode``): pixel-dominant orders the output
#: channels by pixel offset first (DCR), channel-dominant by input channel first (CRD)
DOMINANT_MODES = {"pixel": "DCR", "channel": "CRD"}
#: the ``mode`` values of space_to_depth / depth_to_space: LayerLab's, then the vendor's ``dominant`` values
SHUFFLE_MODES = ("DCR", "CRD", *DOMINANT_MODES)


def shuffle_mode(params: dict[str, Any]) -> None:
    """Replace a vendor ``dominant`` value of ``mode`` by LayerLab's (in place)."""
    params["mode"] = DOMINANT_MODES.get(params["mode"], params["mode"])
