"""PyTorch's size rules (pytorch-allocator.md sections 1 and 2.3), written here from the spec and
independent of cuprof's code: rounding with roundup_power2_divisions, pools, segment sizes, and how
much larger than its rounded request a block can be. The explain, tune and replay tests compute
their expected figures with it."""

MiB = 1 << 20
SMALL = MiB                 # kSmallSize: rounded requests up to here use the small pool
SMALL_BUFFER = 2 * MiB      # kSmallBuffer
LARGE_BUFFER = 20 * MiB     # kLargeBuffer: also max_non_split_rounding's default
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ROUND_LARGE = 2 * MiB       # kRoundLarge
UNSET = float("inf")


def parse_conf(conf):
    """The keys these tests use, from a PYTORCH_CUDA_ALLOC_CONF string."""
    out = {"max_split_size": UNSET, "divisions": [0] * 16, "expandable": False,
           "gc": 0.0, "fraction": 0.0, "max_non_split": LARGE_BUFFER}
    items, depth, cur = [], 0, ""
    for ch in conf:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    if cur:
        items.append(cur)
    for item in items:
        key, value = item.split(":", 1)
        if key == "max_split_size_mb":
            out["max_split_size"] = int(value) * MiB
        elif key == "max_non_split_rounding_mb":
            out["max_non_split"] = int(value) * MiB
        elif key == "expandable_segments":
            out["expandable"] = value == "True"
        elif key == "garbage_collection_threshold":
            out["gc"] = float(value)
        elif key == "per_process_memory_fraction":
            out["fraction"] = float(value)
        elif key == "roundup_power2_divisions":
            out["divisions"] = parse_divisions(value)
    return out


def parse_divisions(value):
    """Section 1.3: a scalar fills all 16 intervals; the list form fills below its first entry
    with that entry's value and after its last with `>`'s."""
    if not value.startswith("["):
        return [int(value)] * 16
    table, first, last = [0] * 16, None, None
    for pair in value.strip("[]").split(","):
        k, v = pair.split(":")
        if k == ">":
            for i in range(last + 1, 16):
                table[i] = int(v)
            continue
        index = min(max(int(k).bit_length() - 1, 0), 15)
        if first is None:
            first = index
            for i in range(index):
                table[i] = int(v)
        table[index] = int(v)
        last = index
    return table


def round_size(size, divisions):
    """Section 1.2."""
    if size < 512:
        return 512
    index = min(max(size.bit_length() - 1 - 20, 0), 15)
    d = divisions[index]
    if d > 1 and size > 512 * d:
        if size & (size - 1) == 0:
            return size
        floor2 = 1 << (size.bit_length() - 1)
        step = floor2 >> (d.bit_length() - 1)
        if step == 0:
            return 2 * floor2
        down = size & ~(step - 1)
        return size if down == size else down + step
    return (size + 511) // 512 * 512


def segment_size(rounded):
    """Section 1.4."""
    if rounded <= SMALL:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return (rounded + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


def block_bounds(size, conf):
    """(least, most) bytes a block serving a request of `size` holds under `conf`: its rounded
    size, plus at most what PyTorch leaves unsplit in it (section 2.3: 1 MiB behind a large
    block; an oversize block is less than max_non_split_rounding larger than its request)."""
    rounded = round_size(size, conf["divisions"])
    if rounded <= SMALL:
        return rounded, rounded
    if rounded >= conf["max_split_size"]:
        return rounded, rounded + conf["max_non_split"]
    return rounded, rounded + SMALL
