"""The Ethos-U55/U65 register command stream: opcodes and parameter fields.

Numbers as in vela's register description (``ethosu/vela/ethos_u55_regs``). A command is
a 32-bit word ``code[0:10] | must_be_zero/payload flag [10:16] | param[16:32]``; when
bit 14 is set (``0x4000`` in the code half-word) it is a cmd1 and one 32-bit payload
word follows. ``NPU_OP_*`` commands start work with the registers as they stand; vela
emits only registers that change, so state carries over between operations.
"""
from __future__ import annotations

CMD1_FLAG = 0x4000

# cmd0: opcode -> name (operations, then 16-bit register writes)
CMD0 = {
    0x000: "NPU_OP_STOP", 0x001: "NPU_OP_IRQ", 0x002: "NPU_OP_CONV",
    0x003: "NPU_OP_DEPTHWISE", 0x005: "NPU_OP_POOL", 0x006: "NPU_OP_ELEMENTWISE",
    0x010: "NPU_OP_DMA_START", 0x011: "NPU_OP_DMA_WAIT", 0x012: "NPU_OP_KERNEL_WAIT",
    0x013: "NPU_OP_PMU_MASK",
    0x100: "IFM_PAD_TOP", 0x101: "IFM_PAD_LEFT", 0x102: "IFM_PAD_RIGHT",
    0x103: "IFM_PAD_BOTTOM", 0x104: "IFM_DEPTH_M1", 0x105: "IFM_PRECISION",
    0x107: "IFM_UPSCALE", 0x109: "IFM_ZERO_POINT", 0x10A: "IFM_WIDTH0_M1",
    0x10B: "IFM_HEIGHT0_M1", 0x10C: "IFM_HEIGHT1_M1", 0x10D: "IFM_IB_END",
    0x10F: "IFM_REGION", 0x111: "OFM_WIDTH_M1", 0x112: "OFM_HEIGHT_M1",
    0x113: "OFM_DEPTH_M1", 0x114: "OFM_PRECISION", 0x115: "OFM_BLK_WIDTH_M1",
    0x116: "OFM_BLK_HEIGHT_M1", 0x117: "OFM_BLK_DEPTH_M1", 0x118: "OFM_ZERO_POINT",
    0x11A: "OFM_WIDTH0_M1", 0x11B: "OFM_HEIGHT0_M1", 0x11C: "OFM_HEIGHT1_M1",
    0x11F: "OFM_REGION", 0x120: "KERNEL_WIDTH_M1", 0x121: "KERNEL_HEIGHT_M1",
    0x122: "KERNEL_STRIDE", 0x123: "PARALLEL_MODE", 0x124: "ACC_FORMAT",
    0x125: "ACTIVATION", 0x126: "ACTIVATION_MIN", 0x127: "ACTIVATION_MAX",
    0x128: "WEIGHT_REGION", 0x129: "SCALE_REGION", 0x12D: "AB_START", 0x12F: "BLOCKDEP",
    0x130: "DMA0_SRC_REGION", 0x131: "DMA0_DST_REGION", 0x132: "DMA0_SIZE0",
    0x133: "DMA0_SIZE1", 0x180: "IFM2_BROADCAST", 0x181: "IFM2_SCALAR",
    0x185: "IFM2_PRECISION", 0x189: "IFM2_ZERO_POINT", 0x18A: "IFM2_WIDTH0_M1",
    0x18B: "IFM2_HEIGHT0_M1", 0x18C: "IFM2_HEIGHT1_M1", 0x18D: "IFM2_IB_START",
    0x18F: "IFM2_REGION",
}
# cmd1: opcode (low 10 bits) -> name; the payload word is the register value, the
# parameter half-word carries extra bits (the shift of OFM/OPA scales, address high bits)
CMD1 = {
    0x000: "IFM_BASE0", 0x001: "IFM_BASE1", 0x002: "IFM_BASE2", 0x003: "IFM_BASE3",
    0x004: "IFM_STRIDE_X", 0x005: "IFM_STRIDE_Y", 0x006: "IFM_STRIDE_C",
    0x010: "OFM_BASE0", 0x011: "OFM_BASE1", 0x012: "OFM_BASE2", 0x013: "OFM_BASE3",
    0x014: "OFM_STRIDE_X", 0x015: "OFM_STRIDE_Y", 0x016: "OFM_STRIDE_C",
    0x020: "WEIGHT_BASE", 0x021: "WEIGHT_LENGTH", 0x022: "SCALE_BASE", 0x023: "SCALE_LENGTH",
    0x024: "OFM_SCALE", 0x025: "OPA_SCALE", 0x026: "OPB_SCALE",
    0x030: "DMA0_SRC", 0x031: "DMA0_DST", 0x032: "DMA0_LEN", 0x033: "DMA0_SKIP0",
    0x034: "DMA0_SKIP1",
    0x080: "IFM2_BASE0", 0x081: "IFM2_BASE1", 0x082: "IFM2_BASE2", 0x083: "IFM2_BASE3",
    0x084: "IFM2_STRIDE_X", 0x085: "IFM2_STRIDE_Y", 0x086: "IFM2_STRIDE_C",
    0x090: "WEIGHT1_BASE", 0x091: "WEIGHT1_LENGTH", 0x092: "SCALE1_BASE",
    0x093: "SCALE1_LENGTH",
}
OPERATIONS = {"NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL", "NPU_OP_ELEMENTWISE",
              "NPU_OP_DMA_START"}
# Everything else (waits, IRQ, PMU masks, the SHRAM/block layout registers a real NPU
# needs for scheduling) does not change results: the model records and ignores it.
# field values
IFM_PRECISION = {0: ("u8", 1), 1: ("s8", 1), 4: ("u16", 2), 5: ("s16", 2), 9: ("s32", 4)}
OFM_PRECISION = {0: ("u8", 1), 1: ("s8", 1), 2: ("u16", 2), 3: ("s16", 2), 5: ("s32", 4)}
FORMATS = {0: "NHWC", 1: "NHCWB16"}
ROUNDING = {0: "TFL", 1: "TRUNCATE", 2: "NATURAL"}
# IFM_PRECISION bits 8-9: how ELEMENTWISE ADD/SUB scale their operands
SCALE_MODES = {0: "SCALE_16BIT", 1: "SCALE_OPA_32BIT", 2: "SCALE_OPB_32BIT"}
POOL_MODES = {0: "MAX", 1: "AVERAGE", 2: "REDUCE_SUM"}
ELEMENTWISE_MODES = {0: "MUL", 1: "ADD", 2: "SUB", 3: "MIN", 4: "MAX", 5: "LRELU", 6: "ABS",
                     7: "CLZ", 8: "SHR", 9: "SHL"}
CLIP_RANGES = {0: None, 2: (0, 255), 3: (-128, 127), 5: (-32768, 32767)}
TYPE_RANGES = {"u8": (0, 255), "s8": (-128, 127), "u16": (0, 65535), "s16": (-32768, 32767),
               "s32": (-(1 << 31), (1 << 31) - 1)}

