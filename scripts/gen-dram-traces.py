#!/usr/bin/env python3
"""Writes the DRAM comparison traces of docs/decisions/dram.md ("Peer comparison").

    python3 scripts/gen-dram-traces.py OUTDIR

* stream-paced.trace   1 M 64 B reads, consecutive, one per cycle (DRAMsim3 format)
* random-1m.trace      1 M 32 B-aligned random reads, no timing (Ramulator format)
* mix-5m.trace         5 M 32 B-aligned random accesses, 20 % writes (Ramulator format)
* random-paced.trace   1 M random 64 B reads/writes (20 % writes), one per cycle (DRAMsim3)

Addresses are uniform over the 4 GiB hbm2-2000 device; fixed seeds, so every run writes
the same bytes.
"""
import random
import sys

CAP = 4 << 30


def main():
    out = sys.argv[1]
    with open(f"{out}/stream-paced.trace", "w") as f:
        f.writelines(f"0x{i * 64:x} R {i}\n" for i in range(1_000_000))
    r = random.Random(15)
    with open(f"{out}/random-1m.trace", "w") as f:
        f.writelines(f"LD 0x{r.randrange(CAP // 32) * 32:x}\n" for _ in range(1_000_000))
    r = random.Random(16)
    with open(f"{out}/mix-5m.trace", "w") as f:
        for _ in range(5_000_000):
            op = "ST" if r.random() < 0.2 else "LD"
            f.write(f"{op} 0x{r.randrange(CAP // 32) * 32:x}\n")
    r = random.Random(17)
    with open(f"{out}/random-paced.trace", "w") as f:
        for i in range(1_000_000):
            op = "W" if r.random() < 0.2 else "R"
            f.write(f"0x{r.randrange(CAP // 64) * 64:x} {op} {i}\n")


if __name__ == "__main__":
    main()
