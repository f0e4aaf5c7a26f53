"""Copies a GGUF file with extra metadata keys, for tests of what drift reads from metadata
(e.g. a model's general.sampling.* recommendation) on a real model. Follows the GGUF v3 layout:
header, key-value pairs, tensor infos, padding to general.alignment (32 when absent), tensor
data — tensor offsets are relative to the data section, so they stay valid."""
import struct

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
STRING, ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        value = struct.unpack_from("<" + fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize("<" + fmt)
        return value

    def string(self):
        n = self.take("Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s.decode()

    def value(self, t):
        if t in SCALARS:
            return self.take(SCALARS[t])
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"unknown GGUF type {t}")


def encode(t, value):
    if t in SCALARS:
        return struct.pack("<" + SCALARS[t], value)
    if t == STRING:
        b = value.encode()
        return struct.pack("<Q", len(b)) + b
    raise ValueError(f"cannot write GGUF type {t}")


def copy_with_metadata(src, dst, extra):
    """extra: {key: (gguf type number, value)} for scalar and string values."""
    data = open(src, "rb").read()
    r = Reader(data)
    assert data[:4] == b"GGUF" and struct.unpack_from("<I", data, 4)[0] == 3
    r.pos = 8
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    kv_start = r.pos
    alignment = 32
    for _ in range(n_kv):
        key, t = r.string(), r.take("I")
        value = r.value(t)
        if key == "general.alignment":
            alignment = value
    kv_end = r.pos
    for _ in range(n_tensors):
        r.string()
        dims = r.take("I")
        r.pos += 8 * dims + 4 + 8
    infos_end = r.pos
    data_start = -(-infos_end // alignment) * alignment
    added = b"".join(encode(STRING, k) + struct.pack("<I", t) + encode(t, v)
                     for k, (t, v) in extra.items())
    head = (data[:8] + struct.pack("<QQ", n_tensors, n_kv + len(extra)) + data[kv_start:kv_end]
            + added + data[kv_end:infos_end])
    head += b"\0" * ((-len(head)) % alignment)
    with open(dst, "wb") as out:
        out.write(head)
        out.write(data[data_start:])
