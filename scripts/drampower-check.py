#!/usr/bin/env python3
"""An independent check of nmcp's DRAM core energy against DRAMPower's equations.

DRAMPower (tukl-msd/DRAMPower) cannot be built or downloaded on this project's machines,
so this script evaluates the equations its legacy model (version 4, the one gem5 ships)
documents, written afresh from their description, over the command trace a real
`nmcp mem --command-trace FILE` run wrote, with the preset's currents and timings:

  per rank (here a pseudo-channel: its own banks and background state)
    ACT   n_act x tRAS x (IDD0 - IDD3N)            PRE  n_pre x tRP x (IDD0 - IDD2N)
    RD    n_rd  x BL   x (IDD4R - IDD3N)           WR   n_wr  x BL  x (IDD4W - IDD3N)
    REF   n_ref x tRFC x (IDD5 - IDD3N)            REFB n_refb x tREFB x (IDD0 - IDD3N)
    background: IDD3N over the cycles with a bank open, IDD2N over the others; an all-bank
    refresh counts tRFC - tRP of open-bank (active) cycles, as DRAMPower's command
    analysis does; a per-bank refresh changes no rank state.
  times VDD and tCK, currents scaled from the IDD width to the pseudo-channel's bus.

It prints both models' components and the relative difference of the DRAM core total
(the interface is left out: DRAMPower's I/O model is a DDR termination model, nmcp's is
HBM's per-bit I/O + TSV figure). Exit 1 if the core totals differ by more than --tolerance.

Usage (docs/decisions/energy.md):
  nmcp mem --requests 100000 --refresh all-bank --command-trace cmds.csv --json > run.json
  scripts/drampower-check.py emulator/presets/hbm2-2000.toml cmds.csv run.json
"""

import argparse
import json
import sys
import tomllib


def analyse(trace_path, timing):
    """Per-rank command counts and active/precharged cycles, DRAMPower 4's way."""
    ranks = {}
    end = 0

    def rank(r):
        if r not in ranks:
            ranks[r] = dict(open=set(), first_act=0, last_pre=0, act_cycles=0, pre_cycles=0,
                            act=0, pre=0, rd=0, wr=0, ref=0, refb=0)
        return ranks[r]

    with open(trace_path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 2:
                continue
            t, cmd = int(parts[0]), parts[1]
            if cmd == "END_OF_SIMULATION":
                end = t
                continue
            r = rank(int(parts[2]))
            bank = int(parts[4])
            if cmd == "ACT":
                if bank not in r["open"]:
                    r["act"] += 1
                    if not r["open"]:
                        r["first_act"] = t
                        r["pre_cycles"] += max(0, t - r["last_pre"])
                    r["open"].add(bank)
            elif cmd == "RD":
                r["rd"] += 1
            elif cmd == "WR":
                r["wr"] += 1
            elif cmd == "PRE":
                if bank in r["open"]:
                    r["pre"] += 1
                    if len(r["open"]) == 1:
                        r["act_cycles"] += t - r["first_act"]
                        r["last_pre"] = t
                    r["open"].discard(bank)
            elif cmd == "PREA":
                if r["open"]:
                    r["act_cycles"] += t - r["first_act"]
                    r["last_pre"] = t
                    r["pre"] += len(r["open"])
                    r["open"].clear()
            elif cmd == "REFA":
                r["ref"] += 1
                r["pre_cycles"] += max(0, t - r["last_pre"])
                r["last_pre"] = t + timing["trfc"] - timing["trp"]
                r["act_cycles"] += timing["trfc"] - timing["trp"]
                r["open"].clear()
            elif cmd == "REFB":
                r["refb"] += 1
            else:
                sys.exit(f"{trace_path}: line `{line.strip()}`: unknown command {cmd}")
    for r in ranks.values():
        if r["open"]:
            r["act_cycles"] += end - r["first_act"]
        else:
            r["pre_cycles"] += max(0, end - r["last_pre"])
    return ranks, end


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset", help="the HBM preset TOML the run used")
    ap.add_argument("trace", help="the run's --command-trace file")
    ap.add_argument("report", help="the run's --json output")
    ap.add_argument("--pseudo-channels", type=int, default=None,
                    help="pseudo-channels of the run (default: from the report)")
    ap.add_argument("--tolerance", type=float, default=0.05)
    a = ap.parse_args()

    with open(a.preset, "rb") as f:
        p = tomllib.load(f)
    e, t, o = p["energy"], p["timing"], p["organisation"]
    scale = o["bus_width_bits"] / e["idd_width_bits"]
    v, tck = e["vdd_v"], o["tck_ns"]
    idd = {k: e[k] * scale for k in e if k.startswith("idd") and k.endswith("_ma")}
    pj = lambda cycles, ma: cycles * tck * ma * v  # mA x V x ns = pJ

    ranks, end = analyse(a.trace, t)
    with open(a.report) as f:
        rep = json.load(f)
    pcs = a.pseudo_channels or rep["pseudo_channels"]
    # Pseudo-channels that issued no command sit precharged for the whole run.
    idle_ranks = pcs - len(ranks)
    c = dict(act=0.0, pre=0.0, rd=0.0, wr=0.0, ref=0.0, bg_act=0.0, bg_pre=0.0)
    for r in ranks.values():
        c["act"] += pj(r["act"] * t["tras"], idd["idd0_ma"] - idd["idd3n_ma"])
        c["pre"] += pj(r["pre"] * t["trp"], idd["idd0_ma"] - idd["idd2n_ma"])
        c["rd"] += pj(r["rd"] * t["bl"], idd["idd4r_ma"] - idd["idd3n_ma"])
        c["wr"] += pj(r["wr"] * t["bl"], idd["idd4w_ma"] - idd["idd3n_ma"])
        c["ref"] += pj(r["ref"] * t["trfc"], idd["idd5ab_ma"] - idd["idd3n_ma"])
        c["ref"] += pj(r["refb"] * t["trfcpb"], idd["idd0_ma"] - idd["idd3n_ma"])
        c["bg_act"] += pj(r["act_cycles"], idd["idd3n_ma"])
        c["bg_pre"] += pj(r["pre_cycles"], idd["idd2n_ma"])
    c["bg_pre"] += pj(idle_ranks * end, idd["idd2n_ma"])
    dp_core = sum(c.values()) * 1e-12

    comp = rep["energy"]["components_j"]
    nm = {
        "act": comp.get("dram_activate", 0.0),
        "pre": comp.get("dram_precharge", 0.0),
        "rd": comp.get("dram_read", 0.0),
        "wr": comp.get("dram_write", 0.0),
        "ref": comp.get("dram_refresh", 0.0),
        "bg_act": comp.get("dram_background_active", 0.0),
        "bg_pre": comp.get("dram_background_idle", 0.0),
    }
    nm_core = sum(nm.values())
    print(f"{'component':<10}{'DRAMPower eq. (uJ)':>20}{'nmcp (uJ)':>14}")
    for k in c:
        print(f"{k:<10}{c[k] * 1e-6:>20.3f}{nm[k] * 1e6:>14.3f}")
    diff = (nm_core - dp_core) / dp_core
    print(f"{'core':<10}{dp_core * 1e6:>20.3f}{nm_core * 1e6:>14.3f}   nmcp {diff:+.2%}")
    if abs(diff) > a.tolerance:
        print(f"core energies differ by more than {a.tolerance:.0%}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
