#!/usr/bin/env python3
"""ring_compact.py RING OUT: rewrites a recorder's .ring staging file (GiB,
sparse) into a small one with the same content for the importer: node
capacity cut to the nodes handed out, rings cut to those ever claimed, each
ring cut to the last SLOTS events before its head (slots re-indexed to the
smaller power of two). Layout: trace_format.h, struct tf_ring_file."""
import struct
import sys

HDR = "<QIIQIIIIQQQIIII"      # struct tf_ring_file, 80 bytes
SLOTS = 64                    # events kept per ring (a power of two)
NODES_AT = 128                # node 0 after the padded header
EV = 32                       # struct tf_event
RING_HDR = 64                 # struct tf_ring


def main(src, dst):
    with open(src, "rb") as f:
        h = list(struct.unpack(HDR, f.read(80)))
        (magic, ver, pid, t0, max_nodes, max_rings, nev, _r0, noff, roff,
         stride, nnext, used, fin, _r1) = h
        nodes = min(nnext, max_nodes)
        f.seek(noff)
        node_bytes = f.read(16 * nodes)
        rings = []
        for i in range(min(used, max_rings)):
            f.seek(roff + i * stride)
            rh = bytearray(f.read(RING_HDR))
            head = struct.unpack_from("<Q", rh, 16)[0]
            slots = bytearray(EV * SLOTS)
            for seq in range(max(0, head - SLOTS), head):
                f.seek(roff + i * stride + RING_HDR + (seq & (nev - 1)) * EV)
                slots[(seq & (SLOTS - 1)) * EV:][:EV] = f.read(EV)
            rings.append(bytes(rh) + bytes(slots))
    new_roff = (NODES_AT + 16 * nodes + 63) // 64 * 64
    new_stride = RING_HDR + EV * SLOTS
    out = bytearray(struct.pack(HDR, magic, ver, pid, t0, nodes, len(rings),
                                SLOTS, 0, NODES_AT, new_roff, new_stride,
                                nodes, len(rings), fin, 0))
    out += bytes(NODES_AT - len(out)) + node_bytes
    out += bytes(new_roff - len(out))
    for r in rings:
        out += r
    with open(dst, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
