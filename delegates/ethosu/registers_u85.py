"""The Ethos-U85 register command stream: opcodes, as changes to the Ethos-U55's.

Numbers from Arm's public interface header for the U85 (regor's
``architecture/ethosu85/ethos_u85_interface.hpp``, ``cmd0_opcode`` / ``cmd1_opcode``),
checked against the streams vela 5.2.0 writes for ``ethos-u85-*``
(tests/delegates/test_ethosu.py). The word layout is the U55's (``registers.py``):
``code[0:16] | param[16:32]``, bit 14 of the code marks a cmd1 with one payload word
after it. The U85 drops the U55's SHRAM layout registers, reuses 0x12D, names the OPA/OPB
scales IFM/IFM2 scales and the DMA skips strides, and adds RESIZE and BRANCH operations,
broadcast, weight-format, resize and DMA-index registers, three more weight streams and
the OP_SCALAR.
"""
from __future__ import annotations

from pyruntime.delegates.ethosu import registers as u55

# IFM_IB_END, PARALLEL_MODE, AB_START, IFM2_SCALAR, IFM2_IB_START
_CMD0_DROPPED = {0x10D, 0x123, 0x12D, 0x181, 0x18D}
CMD0 = {k: v for k, v in u55.CMD0.items() if k not in _CMD0_DROPPED} | {
    0x007: "NPU_OP_RESIZE", 0x108: "IFM_BROADCAST", 0x12A: "RESIZE_X_SCALE_N_M1",
    0x12B: "RESIZE_Y_SCALE_N_M1", 0x12C: "RESIZE_X_OFFSET", 0x12D: "RESIZE_Y_OFFSET",
    0x12E: "WEIGHT_FORMAT", 0x134: "DMA0_IDX_REGION",
}
CMD1 = u55.CMD1 | {
    0x025: "IFM_SCALE", 0x026: "IFM2_SCALE", 0x027: "OP_SCALAR",
    0x033: "DMA0_SRC_STRIDE0", 0x034: "DMA0_SRC_STRIDE1", 0x035: "DMA0_DST_STRIDE0",
    0x036: "DMA0_DST_STRIDE1", 0x037: "DMA0_IDX", 0x038: "DMA0_IDX_MAX",
    0x039: "DMA0_IDX_SKIP1", 0x092: "WEIGHT2_BASE", 0x093: "WEIGHT2_LENGTH",
    0x094: "WEIGHT3_BASE", 0x095: "WEIGHT3_LENGTH", 0x096: "RESIZE_X", 0x097: "RESIZE_Y",
    0x100: "NPU_OP_BRANCH",
}
OPERATIONS = u55.OPERATIONS | {"NPU_OP_RESIZE", "NPU_OP_BRANCH"}
