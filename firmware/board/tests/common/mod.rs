//! Shared helpers of the board's integration tests: scenario blobs, a host run of the
//! whole report, the report's functional fields, and the CP's first and second decision
//! on a board.
#![allow(dead_code)]

use nmcp_board::layout::Variant;
use nmcp_board::suite::cp::{drain_cp, run_cp_decision, Dispatched};
use nmcp_board::{run_all, scenario, Blobs, Board, NoMeter, MEASURED_KEYS, WINDOW_BYTES};
use nmcp_firmware::Firmware;

pub fn blob<T: serde::Serialize>(v: &T) -> std::vec::Vec<u8> {
    let mut buf = [0u8; scenario::MAX_SCENARIO_BYTES];
    postcard::to_slice(v, &mut buf).unwrap().to_vec()
}

pub fn more_blobs() -> std::vec::Vec<std::vec::Vec<u8>> {
    scenario::lamb_scenarios()
        .iter()
        .skip(2)
        .map(|(_, s)| blob(s))
        .collect()
}

pub fn more_refs(more: &[std::vec::Vec<u8>]) -> std::vec::Vec<&[u8]> {
    more.iter().map(|b| b.as_slice()).collect()
}

/// Drops the measurement fields (and nothing else) from a report.
pub fn functional(report: &str) -> std::vec::Vec<String> {
    report
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("nmcp-board") && !l.starts_with("exit"))
        .map(|l| {
            l.split(' ')
                .filter(|f| {
                    !MEASURED_KEYS
                        .iter()
                        .any(|k| f.strip_prefix(k).is_some_and(|r| r.starts_with('=')))
                })
                .collect::<std::vec::Vec<_>>()
                .join(" ")
        })
        .collect()
}

pub fn host_report() -> String {
    host_report_on(true)
}

pub fn host_report_on(mapped: bool) -> String {
    let mut mem = vec![0u8; WINDOW_BYTES];
    let board = Board::new(&mut mem, || 0);
    let mut board = if mapped { board } else { board.unmapped() };
    let mut fw = Box::<Firmware>::default();
    let (cp, l1, l4) = (
        blob(&scenario::canned_cp()),
        blob(&scenario::canned_lamb(1)),
        blob(&scenario::canned_lamb(4)),
    );
    let more = more_blobs();
    let blobs = Blobs {
        cp: &cp,
        lamb_1t: &l1,
        lamb_4t: &l4,
        lamb_more: &more_refs(&more),
    };
    let mut out = String::new();
    run_all(&mut fw, &mut board, &mut NoMeter, &blobs, &mut out).unwrap();
    out
}

/// The first decision of the board's CP scenario `blob` over all its queues (the
/// CP configured afresh); returns its dispatches.
pub fn first_decision(fw: &mut Firmware, board: &mut Board<'_>, blob: &[u8]) -> Dispatched {
    let all = Variant {
        queues: None,
        shapes: usize::MAX,
    };
    let mut done = Dispatched::new();
    let mut out = String::new();
    let x = format_args!("x");
    run_cp_decision(
        fw,
        board,
        &mut NoMeter,
        blob,
        all,
        &mut done,
        true,
        x,
        &mut out,
    )
    .unwrap();
    done
}

/// The canned 32-queue scenario's second iteration laid out on a board over `mem`
/// (mapped view or not), the CP having decided and drained the first: every queue
/// holds a GEMM of a known shape, not yet rung.
pub fn second_iteration(
    mem: &mut [u8],
    mapped: bool,
) -> (Board<'_>, Box<Firmware>, scenario::CpScenario) {
    let board = Board::new(mem, || 0);
    let mut board = if mapped { board } else { board.unmapped() };
    let mut fw = Box::<Firmware>::default();
    let s = scenario::canned_cp();
    let b = blob(&s);
    let mut done = first_decision(&mut fw, &mut board, &b);
    drain_cp(&mut fw, &mut board, &mut done).unwrap();
    board.lay_out_cp_at(&s, 1).unwrap();
    (board, fw, s)
}
