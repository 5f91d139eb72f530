"""zstd request bodies (`POST /sessions/import`, the only route that takes one), decompressed
whole or refused.

The Harness writes its log as many frames, one per flush: every frame is read. A frame that
stops before its last block (a truncated upload, a log copied while it was written) is refused
naming it, rather than read as the prefix it holds. The decompressed bytes are capped while they
are produced: a body is fed to the decoder in pieces that cannot release more than the room left
under the cap plus one block, so a bomb is never held past the cap. Every refusal names the
frame (`frames/<n>`, from 0) or the body (`""`) and why.
"""

from __future__ import annotations

import zstandard

from governor.lib.errors import Invalid

MAGIC = b"\x28\xb5\x2f\xfd"
# zstd's largest block decodes to 128 KiB, and a block takes at least 4 bytes of input (its
# 3-byte header and 1 byte of an RLE block): n bytes of input release at most n / 4 + 1 blocks.
BLOCK_BYTES = 128 * 1024
SMALLEST_BLOCK = 4
FIRST_PIECE = 4096
LARGEST_PIECE = 1 << 20


def _frame_refusal(frame: int, offset: int, message: str) -> Invalid:
    detail = f"zstd frame {frame} (at byte {offset} of the body) {message}"
    return Invalid(f"zstd body could not be decompressed: {detail}",
                   details=[{"path": f"frames/{frame}", "message": message}])


def zstd_decompressed(body: bytes, *, cap: int, max_frames: int) -> bytes:
    """The bytes of every frame of `body`, in order. Invalid when a frame is corrupt, when the
    body ends inside a frame, past `max_frames` frames (each costs a little work of its own,
    however small), or when the output passes `cap` (the message names the cap; at most one
    block past it is ever held)."""
    view = memoryview(body)
    decompressor = zstandard.ZstdDecompressor()
    pieces: list[bytes] = []
    total = offset = frame = 0
    while offset < len(view):
        if frame >= max_frames:
            raise _frame_refusal(frame, offset, f"is one frame too many: at most {max_frames}")
        start, decoder, size = offset, decompressor.decompressobj(), FIRST_PIECE
        while True:
            room = cap + 1 - total
            bound = max(1, SMALLEST_BLOCK * (room // BLOCK_BYTES - 1))
            piece = view[offset:offset + min(size, bound)]
            try:
                out = decoder.decompress(piece)
            except zstandard.ZstdError as exc:
                raise _frame_refusal(frame, start, f"is not valid zstd ({exc})") from None
            total += len(out)
            if total > cap:
                raise Invalid("decompressed log is larger than the import cap",
                              details=[{"path": "", "message": "decompressed body over the cap"}])
            pieces.append(out)
            if decoder.eof:  # this frame ended inside `piece`: the rest is the next frame's
                offset += len(piece) - len(decoder.unused_data)
                break
            offset += len(piece)
            if offset >= len(view):
                raise _frame_refusal(frame, start, "ends before its last block: the body is "
                                                   "truncated")
            size = min(2 * size, LARGEST_PIECE)
        frame += 1
    return b"".join(pieces)
