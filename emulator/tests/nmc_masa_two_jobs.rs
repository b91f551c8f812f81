//! Two macro-commands in flight per NMC engine (issue 10, `pipelined+masa-2jobs`): the
//! jobs' chunks interleave on one command stream (an ALU-bound job under a column-bound
//! one), the dependencies between jobs hold exactly (a read waits for an older job's
//! write of the column, a write for an older job's read, reductions and scalar writes
//! order the jobs around them), the DRAM gates hold with two jobs' rows open (tRAS, tWR,
//! tRP, tRRD/tFAW, refresh), a random-program property test replays the command log
//! through a fresh checked timing state, LAMB outputs are bit-identical, and no setup
//! beats the physical bound or the policy's own (segment) bound.

use nmcp_emulator::hbm::config::RefreshMode;
use nmcp_emulator::hbm::timing::Gate;
use nmcp_emulator::hbm::{Command, HbmPreset, PseudoChannel};
use nmcp_emulator::lamb::experiment::{self, EngineSetup};
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::memctrl::LoggedCommand;
use nmcp_emulator::memory::DeviceMemory;
use nmcp_emulator::nmc::engine::{
    alu_chunk, job_contexts, scalar_write_cycles, AluModel, RowMap, RowPolicy,
};
use nmcp_emulator::nmc::system::{NmcBlock, NmcFinished};
use nmcp_firmware::nmc::lamb::{lay_out, programs, NmcGeometry};
use nmcp_firmware::nmc::Stage1Program;
use nmcp_firmware::platform::ChannelSet;
use nmcp_isa::asm::parse_macro;
use nmcp_isa::nmc::{MacroCommand, DIV_BY_SCALAR_OPS};
use proptest::prelude::*;

mod common;
use common::{kind, log_of, replay};
use common::{DECOUPLED, TWO_JOBS};

/// Rows per subarray of the 16-subarray hbm2 preset (16384 rows / 16).
const SA: u32 = 1024;

/// An ALU-bound job: `cols` columns of row `row` on, each DIV, SQRT and ADD, written back.
fn alu_bound(row: u32, cols: u32) -> MacroCommand {
    parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count={cols} chunk=4\n\
         .phase row={row}\n  div.f32 ts1, mem, ts0\n  sqrt.f32 ts1, ts1\n  add.f32 mem, ts1, s0\n.end\n"
    ))
    .unwrap()
}

/// A column-bound job: a sum of squares over `cols` columns of row `row` on (chunk 32).
fn sum_of_squares(row: u32, cols: u32) -> MacroCommand {
    parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count={cols} chunk=32\n\
         .phase row={row}\n  sqacc.f32 mem\n.end\n"
    ))
    .unwrap()
}

/// A column-bound job without a reduction: `mem += s0` over `cols` columns of `row` on.
fn add_scalar(row: u32, cols: u32) -> MacroCommand {
    parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count={cols} chunk=32\n\
         .phase row={row}\n  add.f32 mem, mem, s0\n.end\n"
    ))
    .unwrap()
}

/// A two-jobs block (timing only, pseudo-channel 0 logging).
fn two_jobs_rig(p: &HbmPreset, ops_per_tck: u32, map: Option<RowMap>) -> (NmcBlock, DeviceMemory) {
    common::rig_with_map(
        p,
        AluModel::Pipelined { ops_per_tck },
        RowPolicy::MasaTwoJobs,
        map,
    )
}

/// Submits `jobs` at cycle 0 (all queued before the engines run), runs them to the end and
/// returns the job completions by tag.
fn run_together(nmc: &mut NmcBlock, mem: &mut DeviceMemory, jobs: &[&MacroCommand]) -> Vec<u64> {
    for (tag, cmd) in jobs.iter().enumerate() {
        nmc.submit_deferred(0, cmd, mem, tag as u64).unwrap();
    }
    let mut done = vec![0; jobs.len()];
    for f in nmc.poll(u64::MAX) {
        if let NmcFinished::Job { tag, at, status } = f {
            status.unwrap();
            done[tag as usize] = at;
        }
    }
    assert!(nmc.next_poll().is_none(), "everything ran");
    done
}

/// The physical row each column command of `log` goes to (the designated row: the last
/// AB-SA-ACT / AB-SA-SEL before it), with the command's index.
fn columns_by_row(log: &[LoggedCommand]) -> Vec<(usize, &'static str, u32, u32)> {
    let mut row = u32::MAX;
    let mut out = Vec::new();
    for (i, l) in log.iter().enumerate() {
        match l.cmd {
            Command::AbSaAct { row: r } | Command::AbSaSel { row: r } => row = r,
            Command::AbRd { col } => out.push((i, "RD", row, col)),
            Command::AbWr { col } => out.push((i, "WR", row, col)),
            Command::PreAll | Command::Ref => row = u32::MAX,
            _ => {}
        }
    }
    out
}

/// A scalar write latches the register's reciprocal (docs/decisions/isa.md, "Division by
/// a scalar register"): 24 cycles on hbm2-2000. Pipelined, the write takes its 4-cycle
/// slot and the stream moves on, but a division by the register produces its result no
/// earlier than the latch plus its own three dependent operations (the two jobs share an
/// open row, so the division's read comes before the latch and its write-back shows the
/// wait). Column-triggered, the write holds the stream for the latch.
#[test]
fn a_scalar_write_latches_the_reciprocal_before_a_division_uses_it() {
    let p = common::masa_hbm2(RefreshMode::Off, 16);
    let t = *PseudoChannel::new(&p).timing();
    let latch = scalar_write_cycles(&t);
    assert_eq!(latch, 24);
    let open = parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count=1 chunk=1\n\
         .phase row={SA}\n  mov.f32 ts0, mem\n.end\n"
    ))
    .unwrap();
    let div = parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=1 col_count=1 chunk=1\n\
         .phase row={SA}\n  div.f32 mem, mem, s2\n.end\n"
    ))
    .unwrap();
    // (the first command, the division's write-back), everything queued at cycle 0.
    let run = |write: bool| {
        let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
        nmc.submit_deferred(0, &open, &mut mem, 0).unwrap();
        if write {
            nmc.write_scalar(0, ChannelSet { first: 0, count: 2 }, 2, 2f32.to_bits())
                .unwrap();
        }
        nmc.submit_deferred(0, &div, &mut mem, 1).unwrap();
        nmc.poll(u64::MAX);
        let log = log_of(&nmc);
        replay(&p, &log).unwrap();
        let cols = columns_by_row(&log);
        let (wr, _, _, _) = *cols.iter().find(|c| c.1 == "WR" && c.3 == 1).unwrap();
        (log[0].at, log[wr].at)
    };
    let (first, wr) = run(true);
    let (written, wr_without) = run(false);
    // The write is at the cycle the first command would have had; it holds the stream
    // for its slot only.
    assert_eq!(
        first,
        written + t.tccd_l,
        "the stream waits for the write's slot only"
    );
    let ops = u64::from(DIV_BY_SCALAR_OPS) * (t.tccd_l / 2);
    assert!(
        wr >= written + latch + ops,
        "the write-back {wr} waits for the latch ({written} + {latch}) and {ops} cycles of ALU"
    );
    assert!(
        wr_without < written + latch + ops,
        "without the write the division is done sooner ({wr_without}): the latch is what waits"
    );

    // Column-triggered: the stream itself waits for the latch.
    let (mut nmc, mut mem) =
        common::rig_with_map(&p, AluModel::ColumnTriggered, RowPolicy::ProgramOrder, None);
    let done = nmc.submit(0, &open, &mut mem).unwrap();
    let n = log_of(&nmc).len();
    nmc.write_scalar(done, ChannelSet { first: 0, count: 2 }, 2, 2f32.to_bits())
        .unwrap();
    nmc.submit(done, &div, &mut mem).unwrap();
    let log = log_of(&nmc);
    assert_eq!(log[n].at, done + latch, "{:?}", log[n]);
    replay(&p, &log).unwrap();
}

/// An ALU-bound job and a column-bound one in different subarrays run interleaved: the
/// column-bound job's reads go between the ALU-bound job's commands, both finish sooner
/// than one after the other under `masa-decoupled`, and the log passes the checked replay.
#[test]
fn an_alu_bound_job_hides_a_column_bound_one() {
    let p = common::masa_hbm2(RefreshMode::Off, 16);
    let a = alu_bound(SA, 256);
    let b = sum_of_squares(3 * SA, 256);
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    let done = run_together(&mut nmc, &mut mem, &[&a, &b]);
    let log = log_of(&nmc);
    let cols = columns_by_row(&log);
    let in_sa = |s: u32| cols.iter().filter(move |c| c.2 / SA == s);
    let b_first = in_sa(3).map(|c| c.0).min().unwrap();
    let a_last = in_sa(1).map(|c| c.0).max().unwrap();
    assert!(b_first < a_last, "b's reads start while a streams");
    assert_eq!(in_sa(3).count(), 256, "b reads every column once");
    assert_eq!(in_sa(1).filter(|c| c.1 == "WR").count(), 256);
    assert!(
        done[1] >= done[0],
        "completions are reported in submission order"
    );
    replay(&p, &log).unwrap();

    // The same two jobs one after the other (masa-decoupled) take longer.
    let (mut seq, mut mem) =
        common::rig_with_map(&p, AluModel::PIPELINED, RowPolicy::MasaDecoupled, None);
    seq.submit(0, &a, &mut mem).unwrap();
    let sequential = seq.submit(0, &b, &mut mem).unwrap();
    // b's stream (256 reads at tCCD_L) hides for the most part under a's ALU work.
    let t = *PseudoChannel::new(&p).timing();
    assert!(
        done[1] + 256 * t.tccd_l / 2 < sequential,
        "two in flight {} vs one after the other {sequential}",
        done[1]
    );
}

/// A younger job that reads what the older job writes reads each column only after the
/// older job's write of it (RAW), and a younger job that writes what the older job reads
/// writes each column only after the older job's read of it (WAR).
#[test]
fn dependencies_between_jobs_in_flight_hold_column_by_column() {
    let p = common::masa_hbm2(RefreshMode::AllBank, 16);
    // RAW: a writes rows SA.., b sums their squares.
    let a = alu_bound(SA, 192);
    let b = sum_of_squares(SA, 192);
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    run_together(&mut nmc, &mut mem, &[&a, &b]);
    let log = log_of(&nmc);
    let cols = columns_by_row(&log);
    let mut checked = 0;
    for &(i, k, row, col) in &cols {
        if k != "WR" {
            continue;
        }
        let reads: Vec<usize> = cols
            .iter()
            .filter(|c| c.1 == "RD" && c.2 == row && c.3 == col)
            .map(|c| c.0)
            .collect();
        assert_eq!(reads.len(), 2, "row {row} col {col}: a's read and b's");
        assert!(
            reads[0] < i && i < reads[1],
            "row {row} col {col}: b read before a wrote"
        );
        checked += 1;
    }
    assert_eq!(checked, 192);
    replay(&p, &log).unwrap();

    // WAR: a reads rows SA.. (and writes 3 SA..), b adds a scalar to rows SA.. in place.
    let a = parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count=192 chunk=4\n\
         .phase row={SA}\n  div.f32 ts1, mem, ts0\n  sqrt.f32 ts1, ts1\n\
         .phase row={}\n  mov.f32 mem, ts1\n.end\n",
        3 * SA
    ))
    .unwrap();
    let b = add_scalar(SA, 192);
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    run_together(&mut nmc, &mut mem, &[&a, &b]);
    let log = log_of(&nmc);
    let cols = columns_by_row(&log);
    let mut checked = 0;
    for &(i, k, row, col) in cols.iter().filter(|c| c.2 / SA == 1) {
        if k != "WR" {
            continue;
        }
        let reads_before = cols
            .iter()
            .filter(|c| c.1 == "RD" && c.2 == row && c.3 == col && c.0 < i)
            .count();
        assert_eq!(
            reads_before, 2,
            "row {row} col {col}: b wrote before a read"
        );
        checked += 1;
    }
    assert_eq!(checked, 192);
    replay(&p, &log).unwrap();
}

/// Two jobs that reduce never overlap (one accumulator per bank: the second starts after
/// the first is complete); a scalar write does not wait for the job in flight (each job
/// context keeps the scalars it was admitted with), so the job after it that reads the
/// written register still starts while the job before it streams, one command slot
/// later than without the write.
#[test]
fn reductions_and_scalar_writes_order_the_jobs_around_them() {
    let p = common::masa_hbm2(RefreshMode::Off, 16);
    let first_read_in = |nmc: &NmcBlock, s: u32| {
        let log = log_of(nmc);
        columns_by_row(&log)
            .into_iter()
            .find(|c| c.2 / SA == s)
            .map(|c| log[c.0].at)
            .unwrap()
    };
    // Two reductions: an ALU-bound one (which a column-bound job would otherwise overlap)
    // and a sum of squares.
    let reducing = parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count=256 chunk=4\n\
         .phase row={SA}\n  div.f32 ts1, mem, ts0\n  sqrt.f32 ts1, ts1\n  sqacc.f32 ts1\n.end\n"
    ))
    .unwrap();
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    let done = run_together(
        &mut nmc,
        &mut mem,
        &[&reducing, &sum_of_squares(3 * SA, 256)],
    );
    assert!(
        first_read_in(&nmc, 3) >= done[0],
        "a reduction waits for the other"
    );
    replay(&p, &log_of(&nmc)).unwrap();

    // An ALU-bound job, a write of s0 (which both jobs read), an independent job: b, in
    // its own context with the new s0, starts while a (old s0) streams.
    let (a, b) = (alu_bound(SA, 256), add_scalar(3 * SA, 256));
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    nmc.submit_deferred(0, &a, &mut mem, 0).unwrap();
    nmc.write_scalar(0, ChannelSet { first: 0, count: 2 }, 0, 1f32.to_bits())
        .unwrap();
    nmc.submit_deferred(0, &b, &mut mem, 1).unwrap();
    let a_done = nmc
        .poll(u64::MAX)
        .into_iter()
        .find_map(|f| match f {
            NmcFinished::Job { tag: 0, at, .. } => Some(at),
            _ => None,
        })
        .unwrap();
    let with_write = first_read_in(&nmc, 3);
    assert!(
        with_write < a_done,
        "the scalar write does not drain a: b's first read {with_write}, a done {a_done}"
    );

    // Without it, b starts while a streams too, no later.
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    let done = run_together(&mut nmc, &mut mem, &[&a, &b]);
    let without = first_read_in(&nmc, 3);
    assert!(without < done[0], "b overlaps a");
    assert!(
        without <= with_write,
        "the write takes a command slot: {without} vs {with_write}"
    );

    // A reduction's read-out waits for its job, not for the other job in flight.
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    nmc.submit_deferred(0, &a, &mut mem, 0).unwrap();
    nmc.submit_deferred(0, &sum_of_squares(3 * SA, 64), &mut mem, 1)
        .unwrap();
    nmc.reduce_deferred(0, ChannelSet { first: 0, count: 2 }, 2)
        .unwrap();
    let out = nmc.poll(u64::MAX);
    let log = log_of(&nmc);
    let last_read_b = columns_by_row(&log)
        .into_iter()
        .filter(|c| c.2 / SA == 3)
        .map(|c| log[c.0].at)
        .max()
        .unwrap();
    let at = |want: u64| {
        out.iter()
            .find_map(|f| match *f {
                NmcFinished::Job { tag, at, .. } if tag == want => Some(at),
                NmcFinished::Reduce { tag, at, .. } if tag == want => Some(at),
                _ => None,
            })
            .unwrap()
    };
    let host = (1000.0 / p.organisation.tck_ns).ceil() as u64;
    assert!(
        at(2) - host > last_read_b,
        "the read-out follows the reduction"
    );
    assert!(at(2) < at(0), "and does not wait for the ALU-bound job");
}

/// LAMB's stage 1 of one tensor, the scalar write of stage 2's operand (r7, which stage
/// 1 reads too) and stage 2 of an earlier tensor, as the sequencer issues them: with the
/// TS split between the two job contexts (`NmcGeometry::job_contexts` = 2: stage 1 at
/// chunk TS / 8, stage 2 at TS / 2) stage 2 streams while stage 1 is in flight; with the
/// whole TS per program (one context: stage 1 alone fills the TS) it waits for stage 1.
#[test]
fn stage_1_and_stage_2_overlap_under_the_ts_split() {
    let p = common::masa_hbm2(RefreshMode::Off, 16);
    let geometry = |job_contexts| NmcGeometry {
        pseudo_channels: 1,
        banks_per_pc: p.banks_per_pseudo_channel() as u16,
        cols_per_row: p.organisation.columns_per_row,
        column_bytes: p.organisation.bytes_per_column,
        ts_entries: 16,
        job_contexts,
        alu_chunk: alu_chunk(&p, AluModel::Pipelined { ops_per_tck: 1 }),
    };
    let (g1, g2) = (geometry(1), geometry(2));
    assert_eq!((g1.job_ts_entries(), g2.job_ts_entries()), (16, 8));
    // Two tensors of 128 columns per bank, in subarrays 1 and 3.
    let elements = 128 * g1.stripe_bytes() / u64::from(g1.cols_per_row) / 4;
    let a = lay_out(&g1, elements, SA).unwrap().desc;
    let b = lay_out(&g1, elements, 3 * SA).unwrap().desc;
    let run = |g: &NmcGeometry| {
        let s1 = programs::stage1(g, &a, 0, true, Stage1Program::FourSlot).unwrap();
        let s2 = programs::stage2(g, &b, 1).unwrap();
        let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
        nmc.submit_deferred(0, &s1, &mut mem, 0).unwrap();
        nmc.write_scalar(0, ChannelSet { first: 0, count: 1 }, 7, 0.5f32.to_bits())
            .unwrap();
        nmc.submit_deferred(0, &s2, &mut mem, 1).unwrap();
        let mut done = [0; 2];
        for f in nmc.poll(u64::MAX) {
            if let NmcFinished::Job { tag, at, status } = f {
                status.unwrap();
                done[tag as usize] = at;
            }
        }
        let log = log_of(&nmc);
        replay(&p, &log).unwrap();
        let cols = columns_by_row(&log);
        let first_b = cols
            .iter()
            .find(|c| c.2 / SA == 3)
            .map(|c| log[c.0].at)
            .unwrap();
        let last_a = cols
            .iter()
            .filter(|c| c.2 / SA == 1)
            .map(|c| log[c.0].at)
            .max()
            .unwrap();
        ((s1.chunk, s2.chunk), first_b, last_a, done)
    };
    let (chunks, first_b, _, done) = run(&g1);
    assert_eq!(chunks, (4, 16));
    assert!(first_b >= done[0], "one context: stage 2 waits for stage 1");
    let (chunks, first_b, last_a, split_done) = run(&g2);
    assert_eq!(chunks, (2, 8));
    assert!(
        first_b < split_done[0],
        "split: stage 2 starts at {first_b}, before stage 1 completes at {}",
        split_done[0]
    );
    // What the split costs here (docs/decisions/nmc-alu-issue.md, "Per-context scalars
    // and the TS split"): stage 1's five arrays share subarray 1, so at chunk 2 it
    // re-opens its rows twice as often and streams its last column later than it
    // completes at chunk 4; the arbiter feeds it while the ALU's backlog is short, so
    // stage 2 runs in its tail, and the pair ends later than one after the other.
    assert!(last_a > done[0], "{last_a} vs {}", done[0]);
    assert!(split_done[1] > done[1], "{} vs {}", split_done[1], done[1]);
}

/// Gate by gate with two jobs' rows open and refresh on: every AB-SA-PRE comes tRAS after
/// its subarray's ACT and CWL + BL + tWR after the last write to its row; every AB-SA-ACT
/// tRP after its subarray's PRE, tRRD and tFAW (an all-bank ACT counts four) after the
/// previous ACT; PREA tRP before each REF, the next ACT exactly tRFC after it (its
/// earliest cycle, gate tRFC), one REF per tREFI; the log replays through the checked
/// state.
#[test]
fn two_jobs_meet_tras_twr_trp_tfaw_and_refresh() {
    let p = common::masa_hbm2(RefreshMode::AllBank, 16);
    let t = *PseudoChannel::new(&p).timing();
    // Rows alternate between subarrays 1 and 2 (a) and 3 and 4 (b): rows are activated
    // ahead while the other job streams.
    let map = RowMap::new(
        (0..8)
            .map(|j| (j, 1, (j % 2 + 1) * SA + j / 2))
            .chain((0..8).map(|j| (100 + j, 1, (j % 2 + 3) * SA + j / 2)))
            .collect(),
    )
    .unwrap();
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, Some(map));
    let (a, b) = (alu_bound(0, 256), add_scalar(100, 256));
    run_together(&mut nmc, &mut mem, &[&a, &b]);
    let log = log_of(&nmc);
    let end = log.last().unwrap().at;
    let sub = |r: u32| r / SA;
    let (mut acts, mut pres) = (0, 0);
    for (i, l) in log.iter().enumerate() {
        match l.cmd {
            Command::AbSaPre { row: pre_row } => {
                // (The command names its subarray; the row it closes is the last one
                // activated there.)
                pres += 1;
                let act = log[..i]
                    .iter()
                    .rev()
                    .find(
                        |x| matches!(x.cmd, Command::AbSaAct { row: r } if sub(r) == sub(pre_row)),
                    )
                    .expect("an open row");
                let Command::AbSaAct { row } = act.cmd else {
                    unreachable!()
                };
                assert!(l.at >= act.at + t.tras, "tRAS of row {row}");
                let mut designated = u32::MAX;
                let mut last_wr = None;
                for x in &log[..i] {
                    match x.cmd {
                        Command::AbSaAct { row: r } | Command::AbSaSel { row: r } => designated = r,
                        Command::AbWr { .. } if designated == row => last_wr = Some(x.at),
                        _ => {}
                    }
                }
                if let Some(w) = last_wr {
                    assert!(l.at >= w + t.wr_to_pre, "CWL + BL + tWR of row {row}");
                }
            }
            Command::AbSaAct { row } => {
                acts += 1;
                if let Some(prev) = log[..i]
                    .iter()
                    .rev()
                    .find(|x| matches!(x.cmd, Command::AbSaAct { .. } | Command::AbAct { .. }))
                {
                    assert!(l.at >= prev.at + t.tfaw.max(t.trrd_l), "tFAW / tRRD");
                }
                if let Some(pre) = log[..i].iter().rev().find(|x| {
                    matches!(x.cmd, Command::AbSaPre { row: r } if sub(r) == sub(row))
                        || matches!(x.cmd, Command::PreAll)
                }) {
                    assert!(l.at >= pre.at + t.trp, "tRP before row {row}");
                }
            }
            _ => {}
        }
    }
    assert!(
        acts >= 8 && pres >= 4,
        "rows moved: {acts} ACTs, {pres} PREs"
    );
    let refs: Vec<usize> = (0..log.len()).filter(|&i| kind(&log[i]) == "REF").collect();
    assert!(!refs.is_empty());
    assert_eq!(refs.len() as u64, end / t.trefi, "one REF per tREFI");
    for &r in &refs {
        assert_eq!(
            kind(&log[r - 1]),
            "PREA",
            "every subarray closes before a REF"
        );
        assert!(log[r].at - log[r - 1].at >= t.trp, "tRP before REF");
        // The next ACT at its earliest cycle, gated by tRFC.
        let mut pc = PseudoChannel::new(&p);
        for l in &log[..=r] {
            pc.issue(&l.cmd, l.at).unwrap();
        }
        let next = &log[r + 1];
        assert!(kind(next).starts_with("AB-SA-ACT"));
        assert_eq!(
            pc.earliest_with_gate(&next.cmd),
            (next.at, Gate::Trfc),
            "the ACT after a REF"
        );
    }
    replay(&p, &log).unwrap();
}

/// Refresh-access parallelism (SARP) under `masa-2jobs`: each refresh closes only the
/// subarray the DRAM's refresh counter points at (successive refreshes go round the 16),
/// there is still one refresh per tREFI, every command passes the checked replay, and the
/// pair finishes sooner than with all-bank REF. While a subarray the jobs do not use is
/// refreshed, the stream issues columns; when it refreshes the one the stream is in, that
/// row is re-opened no earlier than tRFC after the refresh.
#[test]
fn a_subarray_refresh_lets_the_stream_go_on_during_trfc() {
    let sarp = common::masa_hbm2_sarp(16);
    let plain = common::masa_hbm2(RefreshMode::AllBank, 16);
    let t = *PseudoChannel::new(&sarp).timing();
    // a in subarrays 2 and 3, b in 5 and 6 (rows alternating).
    let used = [2u32, 3, 5, 6];
    let map = || {
        RowMap::new(
            (0..32)
                .map(|j| (j, 1, (j % 2 + 2) * SA + j / 2))
                .chain((0..32).map(|j| (100 + j, 1, (j % 2 + 5) * SA + j / 2)))
                .collect(),
        )
        .unwrap()
    };
    // Two column-bound jobs: the stream, not the ALU, sets the end.
    let (a, b) = (add_scalar(0, 1024), add_scalar(100, 1024));
    let run = |p: &HbmPreset| {
        let (mut nmc, mut mem) = two_jobs_rig(p, 1, Some(map()));
        let done = run_together(&mut nmc, &mut mem, &[&a, &b]);
        (done.into_iter().max().unwrap(), log_of(&nmc))
    };
    let (end_plain, _) = run(&plain);
    let (end, log) = run(&sarp);
    assert!(end < end_plain, "SARP {end} vs all-bank REF {end_plain}");
    assert!(!log.iter().any(|l| kind(l) == "REF"), "no all-bank REF");
    let refs: Vec<(u64, u32)> = log
        .iter()
        .filter_map(|l| match l.cmd {
            Command::AbSaRef { row } => Some((l.at, row / SA)),
            _ => None,
        })
        .collect();
    assert!(refs.len() >= 3, "{refs:?}");
    assert_eq!(refs.len() as u64, end / t.trefi, "one refresh per tREFI");
    let (mut free, mut busy) = (0, 0);
    for (k, &(at, sub)) in refs.iter().enumerate() {
        assert_eq!(
            sub,
            k as u32 % 16,
            "the refresh counter goes round the subarrays"
        );
        if used.contains(&sub) {
            busy += 1;
            if let Some(act) = log
                .iter()
                .find(|l| l.at > at && matches!(l.cmd, Command::AbSaAct { row } if row / SA == sub))
            {
                assert!(
                    act.at >= at + t.trfc,
                    "subarray {sub} re-opened at {}",
                    act.at
                );
            }
        } else {
            free += 1;
            assert!(
                log.iter().any(|l| {
                    matches!(l.cmd, Command::AbRd { .. } | Command::AbWr { .. })
                        && l.at > at
                        && l.at < at + t.trfc
                }),
                "columns move while unused subarray {sub} refreshes (at {at})"
            );
        }
    }
    assert!(free >= 2 && busy >= 1, "{refs:?}");
    replay(&sarp, &log).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Two jobs in flight never issue a command a gate forbids: several different random
    /// programs (their rows alternating over 2..=4 subarrays, overlapping or not), chunk
    /// sizes, start columns that cross rows, ALU rates, refresh (all-bank or per
    /// subarray), scalar writes and
    /// reductions between them, all queued before the engine runs, replayed through the
    /// checked timing state.
    #[test]
    fn two_jobs_never_violate_a_gate(
        jobs in prop::collection::vec(
            (
                1u8..=8,
                1u32..=80,
                0u32..40,
                prop::collection::vec((0usize..common::BLOCKS.len(), 0u32..12), 1..=3),
                0u8..3,
            ),
            2..=4,
        ),
        ways in 2u32..=4,
        ops_per_tck in 1u32..=4,
        refresh in 0u8..3,
    ) {
        // No refresh, all-bank REF, or refresh-access parallelism (AB-SA-REF).
        let p = match refresh {
            0 => common::masa_hbm2(RefreshMode::Off, 16),
            1 => common::masa_hbm2(RefreshMode::AllBank, 16),
            _ => common::masa_hbm2_sarp(16),
        };
        let map = RowMap::new(
            (0..24).map(|j| (j, 1, (j % ways + 1) * SA + j / ways)).collect(),
        )
        .unwrap();
        let (mut nmc, mut mem) = two_jobs_rig(&p, ops_per_tck, Some(map));
        let ch = ChannelSet { first: 0, count: 2 };
        for (tag, (chunk, cols, start, phases, marker)) in jobs.iter().enumerate() {
            let cmd = common::program(*chunk, *cols, *start, phases);
            nmc.submit_deferred(0, &cmd, &mut mem, tag as u64).unwrap();
            match marker {
                1 => nmc.write_scalar(0, ch, 1, 2f32.to_bits()).unwrap(),
                2 => nmc.reduce_deferred(0, ch, 100 + tag as u64).unwrap(),
                _ => {}
            }
        }
        let out = nmc.poll(u64::MAX);
        prop_assert_eq!(
            out.iter().filter(|f| matches!(f, NmcFinished::Job { .. })).count(),
            jobs.len()
        );
        let log = log_of(&nmc);
        prop_assert!(!log.is_empty());
        let r = replay(&p, &log);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// Two jobs in flight compute the same bits as column-triggered program order and
/// `masa-decoupled` (three LAMB steps, functional, four tensors), at 1 and 3 ops/tCK.
#[test]
fn two_jobs_outputs_are_identical_to_the_other_policies() {
    let p = common::masa_hbm2(RefreshMode::AllBank, 16);
    let (base, base_err, base_norm, _) =
        common::lamb_four_slot(&p, EngineSetup::COLUMN_TRIGGERED, 3);
    assert!(base_err <= 1e-5, "column-triggered: {base_err}");
    for setup in [
        DECOUPLED,
        TWO_JOBS,
        EngineSetup {
            alu_model: AluModel::Pipelined { ops_per_tck: 3 },
            row_policy: RowPolicy::MasaTwoJobs,
        },
    ] {
        let (state, err, norm, _) = common::lamb_four_slot(&p, setup, 3);
        let name = setup.name();
        assert!(err <= 1e-5, "{name}: error {err} of the term scale");
        assert_eq!(norm.to_bits(), base_norm.to_bits(), "{name}: global norm");
        common::assert_same_bits(&name, &state, &base);
    }
    // Refresh-access parallelism moves only commands.
    let (state, _, norm, _) = common::lamb_four_slot(&common::masa_hbm2_sarp(16), TWO_JOBS, 3);
    assert_eq!(norm.to_bits(), base_norm.to_bits(), "SARP: global norm");
    common::assert_same_bits("masa-2jobs with SARP", &state, &base);
    // The three-slot program too.
    let (base3, _, _, _) = common::lamb_functional(
        &p,
        EngineSetup::COLUMN_TRIGGERED,
        Stage1Program::ThreeSlot,
        2,
    );
    let (state3, _, _, _) = common::lamb_functional(&p, TWO_JOBS, Stage1Program::ThreeSlot, 2);
    common::assert_same_bits("masa-2jobs three-slot", &state3, &base3);
    // Per-context scalars and the TS split: at TS 16 and 1 op/tCK the sequencer runs
    // stage 1 at chunk 2 and stage 2 at chunk 8 (half the TS each) and writes r7 without
    // draining the engine; at 2 ops/tCK the split needs TS 32. Same bits at every size.
    let split = |ts: u16, ops_per_tck| {
        NmcGeometry {
            pseudo_channels: 1,
            banks_per_pc: 1,
            cols_per_row: p.organisation.columns_per_row,
            column_bytes: p.organisation.bytes_per_column,
            ts_entries: ts,
            job_contexts: job_contexts(RowPolicy::MasaTwoJobsSplit),
            alu_chunk: alu_chunk(&p, AluModel::Pipelined { ops_per_tck }),
        }
        .job_ts_entries()
            < ts
    };
    assert!(split(16, 1) && !split(8, 1) && !split(16, 2) && split(32, 2));
    for (ts, ops_per_tck) in [(8u16, 1), (32, 1), (32, 2)] {
        let setup = EngineSetup {
            alu_model: AluModel::Pipelined { ops_per_tck },
            row_policy: RowPolicy::MasaTwoJobsSplit,
        };
        let (state, err, norm, _) =
            common::lamb_functional_at(&p, setup, Stage1Program::FourSlot, 3, usize::from(ts));
        let name = format!("{} at TS {ts}", setup.name());
        assert!(err <= 1e-5, "{name}: error {err} of the term scale");
        assert_eq!(norm.to_bits(), base_norm.to_bits(), "{name}: global norm");
        common::assert_same_bits(&name, &state, &base);
    }
}

/// No setup, two jobs in flight included, at any TS size, beats the bank-parallelism
/// bound (8x), its program bound, its row-cycle bound or its own segment bound; the
/// policy is never slower than `masa-decoupled` here; the time split adds up.
#[test]
fn two_jobs_speedup_never_exceeds_the_physical_bound() {
    let model = ModelPreset::custom("small", 1, 256, 1024);
    let e = common::sweep_experiment(
        &model,
        HbmPreset::builtin("lamb-ch6-masa16").unwrap(),
        vec![
            DECOUPLED,
            TWO_JOBS,
            EngineSetup {
                alu_model: AluModel::Pipelined { ops_per_tck: 16 },
                row_policy: RowPolicy::MasaTwoJobs,
            },
            EngineSetup {
                alu_model: AluModel::PIPELINED,
                row_policy: RowPolicy::MasaTwoJobsSplit,
            },
        ],
        Stage1Program::FourSlot,
    );
    let r = experiment::run(&e, &mut || {}).unwrap().report;
    assert!((r.physical_bound - 8.0).abs() < 1e-12);
    for m in &r.alu_models {
        let n = &m.name;
        common::assert_setup_within_bounds(n, m, r.physical_bound);
        let bound = m.job_bound.expect("a job or segment bound");
        assert!(m.speedup[0] <= bound, "{n}: {} vs {bound}", m.speedup[0]);
        assert!(bound <= m.program_bound * 1.0001, "{n}");
    }
    let (dec, two) = (&r.alu_models[0], &r.alu_models[1]);
    assert!(
        two.speedup[0] >= dec.speedup[0],
        "{} vs {}",
        two.speedup[0],
        dec.speedup[0]
    );
    // With refresh-access parallelism: within the same bounds, and no slower.
    let e = common::sweep_experiment(
        &model,
        HbmPreset::builtin("lamb-ch6-masa16-sarp").unwrap(),
        vec![TWO_JOBS],
        Stage1Program::FourSlot,
    );
    let s = experiment::run(&e, &mut || {}).unwrap().report;
    let m = &s.alu_models[0];
    common::assert_setup_within_bounds("masa-2jobs with SARP", m, s.physical_bound);
    let bound = m.job_bound.expect("a segment bound");
    assert!(m.speedup[0] <= bound, "SARP: {} vs {bound}", m.speedup[0]);
    assert!(
        m.speedup[0] >= two.speedup[0],
        "SARP {} vs {}",
        m.speedup[0],
        two.speedup[0]
    );
}

/// Mirroring pseudo-channel 0 in timing-only runs gives exactly the full simulation's
/// cycles and counts with two jobs in flight too.
#[test]
fn two_jobs_mirrored_timing_runs_equal_the_full_simulation() {
    let (full, mirrored) = common::full_and_mirrored("lamb-ch6-masa16", TWO_JOBS);
    assert_eq!(full, mirrored);
    let (full, mirrored) = common::full_and_mirrored("lamb-ch6-masa16-sarp", TWO_JOBS);
    assert_eq!(full, mirrored);
}

/// Queued jobs that have not finished take command-queue room (the firmware's submit
/// sees `Busy` before the queue overflows), and leave it when they finish.
#[test]
fn deferred_jobs_take_queue_room_until_they_finish() {
    let p = common::masa_hbm2(RefreshMode::Off, 16);
    let (mut nmc, mut mem) = two_jobs_rig(&p, 1, None);
    let depth = nmc.config().queue_depth;
    let cmd = add_scalar(SA, 64);
    for tag in 0..depth as u64 {
        assert_eq!(nmc.queue_room(0), depth - tag as usize);
        nmc.submit_deferred(0, &cmd, &mut mem, tag).unwrap();
    }
    assert_eq!(nmc.queue_room(0), 0);
    assert!(nmc.submit_deferred(0, &cmd, &mut mem, 99).is_err());
    let done: Vec<u64> = nmc
        .poll(u64::MAX)
        .into_iter()
        .filter_map(|f| match f {
            NmcFinished::Job { at, .. } => Some(at),
            _ => None,
        })
        .collect();
    assert_eq!(done.len(), depth);
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "in order");
    assert_eq!(nmc.queue_room(done[depth - 1]), depth);
}
