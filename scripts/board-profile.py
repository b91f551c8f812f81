#!/usr/bin/env python3
"""Where the instructions of one measured CP decision go, on the board image under QEMU.

Runs the board ELF (built by `nmcp board run`) once on QEMU `virt` with every instruction
traced (`-singlestep -d exec,nochain`), cuts out the N-th call of `Firmware::handle` made by
`run_cp_decision` (the measured region of one `cp_decision_*` report line) and prints its
retired instructions per function, per function of this project (the innermost inlined
frame whose source is ours: where inlined code comes from), per source line, and
optionally an annotated
disassembly of one function (each instruction with how often it ran).

Occurrences, in the order `run_cp_decision` calls `Firmware::handle` (firmware/board/src/suite/cp.rs,
`run_cp`; a decision fixed before every queue was looked at is followed by its measured
follow-up event):
  1 cp_decision_32q_cold   2 cp_decision_32q     3 cp_decision_32q_followup
  4 cp_decision_2g_cold    5 cp_decision_2g      6/7 4g     8/9 8g     10/11 16g
  12 the heterogeneous warm-up (not reported)   13 cp_decision_hetero
  14 the 32-queue warm-up of the next line (not reported)
  15 cp_decision_32q_general (the same steady decision without the mapped view)
The count printed is the report line's `instructions` plus the meter's own ~10.

usage: scripts/board-profile.py [--elf PATH] [--occurrence N] [--annotate FUNCTION]
needs: qemu-system-riscv32, llvm-nm, llvm-objdump, llvm-addr2line (Debian: llvm).
The trace of the whole run is ~1.7 GB in --trace (default /tmp/nmcp-board-trace.log),
reused while it is newer than the ELF.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

ELF = "target/riscv32imac-unknown-none-elf/release/nmcp-board"


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elf", default=ELF)
    ap.add_argument("--occurrence", type=int, default=2)
    ap.add_argument("--annotate", metavar="FUNCTION", help="substring of a function name")
    ap.add_argument("--trace", default="/tmp/nmcp-board-trace.log")
    ap.add_argument("--machine", default="virt",
                    help="QEMU machine the ELF was linked for (sifive_e: the hifive1 build)")
    ap.add_argument("--lamb", type=int, metavar="N",
                    help="profile the N-th LAMB run instead (1 lamb_1t, 2 lamb_4t, 3 lamb_8t)")
    a = ap.parse_args()
    if not os.path.exists(a.elf):
        sys.exit(f"{a.elf}: not found (build it with `nmcp board run`)")
    if not os.path.exists(a.trace) or os.path.getmtime(a.trace) < os.path.getmtime(a.elf):
        subprocess.run(
            ["qemu-system-riscv32", "-machine", a.machine, "-nographic",
             "-semihosting-config", "enable=on,target=native", "-icount", "shift=0",
             "-bios", "none", "-singlestep", "-d", "exec,nochain", "-D", a.trace,
             "-kernel", a.elf],
            stdout=subprocess.DEVNULL, check=False)
    syms = []
    for line in run(["llvm-nm", "-C", "--numeric-sort", "--print-size", a.elf]).splitlines():
        p = line.split(None, 3)
        if len(p) == 4 and p[2] in "tTwW":
            syms.append((int(p[0], 16), int(p[1], 16), re.sub(r"::h[0-9a-f]{16}$", "", p[3])))

    def ranges(pat):
        return [(s, s + n) for s, n, name in syms if re.search(pat, name)]

    def within(pc, rs):
        return any(s <= pc < e for s, e in rs)

    def symbol(pc):
        for s, n, name in syms:
            if s <= pc < s + n:
                return name
        return "?"

    if a.lamb:
        # The N-th `run_lamb` (1 lamb_1t, 2 lamb_4t, 3 lamb_8t, ...): every call it makes
        # into the sequencer (`start_lamb`, `NmcSequencer::on_event`), summed.
        caller = ranges(r"nmcp_board::run_lamb$")
        handler = ranges(r"NmcSequencer::(start_lamb|on_event)$")
        entry = caller[0][0]
    else:
        caller, handler = ranges(r"run_cp_decision"), ranges(r"Firmware::handle$")
        entry = None
    pcs, inside, seen, prev = [], False, 0, None
    rx = re.compile(r"\[[0-9a-f]+/([0-9a-f]+)/")
    with open(a.trace) as f:
        for line in f:
            m = rx.search(line)
            if not m:
                continue
            pc = int(m.group(1), 16)
            if entry is not None:
                if pc == entry:
                    seen += 1
                    if seen > a.lamb:
                        break
                if seen == a.lamb:
                    if not inside and prev is not None and within(pc, handler) and within(prev, caller):
                        inside = True
                    elif inside and within(pc, caller):
                        inside = False
                    if inside:
                        pcs.append(pc)
                prev = pc
                continue
            if not inside:
                if prev is not None and within(pc, handler) and within(prev, caller):
                    seen += 1
                    inside = seen == a.occurrence
                prev = pc
                if not inside:
                    continue
            if within(pc, caller):
                break
            pcs.append(pc)
    if not pcs:
        sys.exit(f"occurrence {a.occurrence} not found ({seen} calls traced)")
    print(f"instructions in the region: {len(pcs)}")
    print("--- per function (not inlined) ---")
    for name, n in collections.Counter(symbol(p) for p in pcs).most_common(25):
        print(f"{n:7d}  {name}")
    uniq = sorted(set(pcs))
    # One addr2line pass (function name, then file:line, per inlined frame, innermost
    # first): the innermost frame's line, and the innermost frame whose file is one of
    # ours for the per-function table (core's and heapless' helpers count to the
    # function that called them).
    lines, own_fn, cur, fn = {}, {}, None, None
    out = run(["llvm-addr2line", "-a", "-f", "-i", "-C", "-e", a.elf] + [hex(p) for p in uniq]).splitlines()
    for l in out:
        if l.startswith("0x"):
            cur, fn = int(l, 16), None
        elif fn is None:
            fn = re.sub(r"::h[0-9a-f]{16}$", "", l)
        else:
            if cur not in lines:
                lines[cur] = re.sub(r".*/((firmware|isa|board|core|heapless)[^/]*/)", r"\1", l)
            if cur not in own_fn and re.search(r"/(firmware|board|isa)/", l):
                own_fn[cur] = symbol(cur) if fn.startswith(".L") else fn
            fn = None
    print("--- per project function (innermost inlined frame of ours) ---")
    for name, n in collections.Counter(own_fn.get(p, "?") for p in pcs).most_common(30):
        print(f"{n:7d}  {name}")
    print("--- per source line (innermost inlined frame, top 40) ---")
    for name, n in collections.Counter(lines.get(p, "?") for p in pcs).most_common(40):
        print(f"{n:7d}  {name}")
    if a.annotate:
        counts = collections.Counter(pcs)
        print(f"--- {a.annotate}: instructions that ran, with their counts ---")
        fn = None
        for l in run(["llvm-objdump", "-d", "-C", "--no-show-raw-insn", a.elf]).splitlines():
            m = re.match(r"^([0-9a-f]+) <(.*)>:", l)
            if m and not m.group(2).startswith(".L"):
                fn = m.group(2)
                continue
            m = re.match(r"\s*([0-9a-f]+):", l)
            if m and fn and a.annotate in fn:
                c = counts.get(int(m.group(1), 16), 0)
                if c:
                    print(f"{c:6d} {l}")


if __name__ == "__main__":
    main()
