//! The board's report run on the host (x86): the same decisions and commands as the
//! committed QEMU output of both machines, and the suite's errors on bad scenarios.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::{blob, functional, host_report, more_blobs, more_refs};
#[cfg(feature = "hifive1")]
use nmcp_board::run_cp;
use nmcp_board::{
    board, report_stack, run_all, run_lamb_suite, run_t3, scenario, Blobs, Board, LayoutError,
    NoMeter, RunError, WINDOW_BYTES,
};
use nmcp_firmware::nmc::NmcSequencer;
use nmcp_firmware::Firmware;

#[test]
fn predictor_shape_matches_firmware() {
    assert_eq!(
        scenario::PREDICTOR_FEATURES,
        nmcp_firmware::cp::FEATURE_COUNT
    );
    assert_eq!(scenario::PREDICTOR_CLASSES, nmcp_firmware::cp::CLASS_COUNT);
}

/// The firmware decides the same on x86 as on RISC-V: the functional fields of a host
/// run equal those of the committed QEMU output.
#[test]
#[cfg_attr(
    feature = "hifive1",
    ignore = "virt's layout (two-packet rings, full window)"
)]
fn host_run_matches_committed_qemu_output() {
    let host = host_report();
    let qemu = include_str!("../expected/virt.txt");
    assert_eq!(functional(&host), functional(qemu), "host report:\n{host}");
}

/// The same for the LAMB and T3 part of the HiFive1 build's report (in the LAMB
/// scenarios' window: the T3 blocks' pending entries fit in it).
#[test]
fn host_lamb_suite_matches_committed_sifive_e_output() {
    let mut mem = vec![0u8; board::LAMB_WINDOW_BYTES];
    let mut board = Board::new(&mut mem, || 0);
    let mut seq = NmcSequencer::default();
    let (l1, l4) = (
        blob(&scenario::canned_lamb(1)),
        blob(&scenario::canned_lamb(4)),
    );
    let more = more_blobs();
    let blobs = Blobs {
        cp: &[],
        lamb_1t: &l1,
        lamb_4t: &l4,
        lamb_more: &more_refs(&more),
    };
    let mut out = String::new();
    run_lamb_suite(&mut seq, &mut board, &mut NoMeter, &blobs, &mut out).unwrap();
    let mut t3 = nmcp_firmware::t3::T3Programmer::default();
    run_t3(&mut t3, &mut board, &mut NoMeter, &mut out).unwrap();
    report_stack(&mut NoMeter, &mut out).unwrap();
    // The LAMB and T3 part of the report (its CP lines: `small_cp_decides_like_...`).
    let qemu: std::vec::Vec<String> = functional(include_str!("../expected/sifive_e.txt"))
        .into_iter()
        .filter(|l| !l.starts_with("cp_decision"))
        .collect();
    assert_eq!(functional(&out), qemu, "host report:\n{out}");
}

/// The HiFive1 configuration of the CP (`--features hifive1`: the firmware's small
/// tables, one-packet rings, the compact window) decides exactly what the virt build
/// decides: every CP line's decision fields and dispatch hash
/// equal the committed virt run's. Run with
/// `cargo test -p nmcp-board --features hifive1 --test host_run small_cp`.
#[cfg(feature = "hifive1")]
#[test]
fn small_cp_decides_like_committed_virt_output() {
    assert_eq!(board::BACKED_WINDOW_BYTES, 3024);
    let mut mem = vec![0u32; board::BACKED_WINDOW_BYTES / 4];
    // SAFETY: u32 to bytes, same allocation and length in bytes.
    let bytes =
        unsafe { core::slice::from_raw_parts_mut(mem.as_mut_ptr().cast::<u8>(), mem.len() * 4) };
    let mut board = Board::new(bytes, || 0);
    let mut fw = Box::<Firmware>::default();
    let cp = blob(&scenario::canned_cp_one_deep());
    let mut out = String::new();
    run_cp(&mut fw, &mut board, &mut NoMeter, &cp, &mut out).unwrap();
    // The decisions and the work that led to them (the same packets read, the same
    // fast-path visits), not the model cycles of the one-deep rings' layout.
    const DECISION: [&str; 14] = [
        "gemms",
        "dispatched",
        "cd",
        "predicted",
        "swapped",
        "mem_accesses",
        "bytes_read",
        "predictions",
        "visits",
        "mapped_visits",
        "decoded",
        "dispatches",
        "mapped_dispatches",
        "dispatch_hash",
    ];
    let decisions = |report: &str| -> std::vec::Vec<String> {
        report
            .lines()
            .filter(|l| l.starts_with("cp_decision"))
            .map(|l| {
                l.split(' ')
                    .filter(|f| {
                        !f.contains('=')
                            || DECISION
                                .iter()
                                .any(|k| f.strip_prefix(k).is_some_and(|r| r.starts_with('=')))
                    })
                    .collect::<std::vec::Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    let virt = decisions(include_str!("../expected/virt.txt"));
    assert_eq!(virt.len(), 13);
    assert_eq!(decisions(&out), virt, "host report:\n{out}");
    // And every functional field of the committed sifive_e run's CP lines.
    let sifive: std::vec::Vec<String> = functional(include_str!("../expected/sifive_e.txt"))
        .into_iter()
        .filter(|l| l.starts_with("cp_decision"))
        .collect();
    assert_eq!(sifive.len(), 13);
    let host: std::vec::Vec<String> = functional(&out);
    assert_eq!(host, sifive, "host report:\n{out}");
}

#[test]
#[cfg_attr(
    feature = "hifive1",
    ignore = "virt's layout (two-packet rings, full window)"
)]
fn cp_scenario_decides_cd8_for_the_first_shape() {
    let host = host_report();
    let line = host
        .lines()
        .find(|l| l.starts_with("cp_decision_32q"))
        .unwrap();
    // 16 GEMMs of the 3072-row shape ask for CD 8: eight run, each with its GPU/4
    // kernel patched in.
    assert!(
        line.contains(" dispatched=8 cd=8 predicted=8 swapped=8 "),
        "{line}"
    );
}

#[test]
#[cfg_attr(
    feature = "hifive1",
    ignore = "virt's layout (two-packet rings, full window)"
)]
fn lamb_scenarios_emit_five_commands_and_two_reductions_per_tensor() {
    let host = host_report();
    for (name, t) in [("lamb_1t", 1u32), ("lamb_4t", 4)] {
        let line = host.lines().find(|l| l.starts_with(name)).unwrap();
        // Per tensor: sqacc g, stage 1, sqacc w, sqacc u, stage 2.
        assert!(
            line.contains(&format!("macro_commands={}", 5 * t)),
            "{line}"
        );
        // One global reduction plus two per tensor.
        assert!(
            line.contains(&format!("reductions={}", 1 + 2 * t)),
            "{line}"
        );
    }
}

#[test]
fn malformed_blob_is_an_error() {
    let mut mem = vec![0u8; WINDOW_BYTES];
    let mut board = Board::new(&mut mem, || 0);
    let mut fw = Box::<Firmware>::default();
    let l = blob(&scenario::canned_lamb(1));
    let blobs = Blobs {
        cp: &[0xFF, 0xFF],
        lamb_1t: &l,
        lamb_4t: &l,
        lamb_more: &[],
    };
    let mut out = String::new();
    let e = run_all(&mut fw, &mut board, &mut NoMeter, &blobs, &mut out).unwrap_err();
    assert!(matches!(e, RunError::Decode(_)), "{e}");
}

#[test]
fn oversized_scenarios_are_rejected() {
    let mut mem = vec![0u8; WINDOW_BYTES];
    let mut board = Board::new(&mut mem, || 0);
    let mut s = scenario::canned_cp();
    s.ring_packets = 64;
    assert_eq!(board.lay_out_cp(&s).unwrap_err(), LayoutError::Ring(64));
    s.ring_packets = 3;
    assert_eq!(board.lay_out_cp(&s).unwrap_err(), LayoutError::Ring(3));
    let mut s = scenario::canned_cp();
    s.queues = 33;
    assert_eq!(board.lay_out_cp(&s).unwrap_err(), LayoutError::Queues(33));
}
