//! Controller sequence tests: exact command sequences with cycles for row hits, misses,
//! conflicts, 64-byte requests, closed page, refresh interleaving and write draining, and
//! the unloaded read latency formula through the whole memory system.
//!
//! hbm2-2000 numbers used below: command overhead 1, tRCDRD 14, tRCDWR 12, CL 14, CWL 5,
//! BL 2, tRP 14, tRAS 34, tRTP 5, tCCD_L 4, tREFI 3900, tRFC 350, tREFI/16 = 243.

use nmcp_emulator::hbm::config::{PagePolicy, RefreshMode};
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, BankId, Command, Cycle, DramAddr, HbmPreset};
use nmcp_emulator::memctrl::{
    Completion, Controller, ControllerConfig, MemorySystem, Request, RequestPart,
};

fn hbm2() -> HbmPreset {
    HbmPreset::builtin("hbm2-2000").unwrap()
}

fn controller(refresh: RefreshMode, page: PagePolicy, depth: usize) -> Controller {
    let p = hbm2();
    let mut cfg = ControllerConfig::with_depth(&p, depth);
    cfg.refresh = refresh;
    cfg.page_policy = page;
    let mut c = Controller::new(&p, cfg);
    c.set_logging(true);
    c
}

/// A request part to enqueue: (arrival, write, bank index, row, col, bursts).
type Part = (Cycle, bool, usize, u32, u32, u8);

/// Feeds `parts` at their arrival cycles and steps the controller until it is idle and
/// the last arrival has passed; returns the completions.
fn drive(c: &mut Controller, parts: &[Part], until: Cycle) -> Vec<Completion> {
    let mut done = Vec::new();
    let mut next_part = 0;
    let mut now = 0;
    let mut wake = 0;
    while now <= until {
        while let Some(&(at, write, bank, row, col, bursts)) = parts.get(next_part) {
            if at > now {
                break;
            }
            let tag = next_part as u32;
            let part = RequestPart {
                write,
                tag,
                bank,
                row,
                col,
                bursts,
            };
            let ready = c.enqueue(now, part).unwrap();
            wake = wake.min(ready);
            next_part += 1;
        }
        if wake <= now {
            wake = c.step(now, &mut done);
        }
        let next_arrival = parts.get(next_part).map_or(Cycle::MAX, |p| p.0);
        if next_part == parts.len() && c.is_idle() && wake > until {
            break;
        }
        now = wake.min(next_arrival).max(now + 1);
    }
    done
}

fn log(c: &Controller) -> Vec<(Cycle, String)> {
    c.log().iter().map(|l| (l.at, l.cmd.to_string())).collect()
}

fn seq(items: &[(Cycle, &str)]) -> Vec<(Cycle, String)> {
    items.iter().map(|(a, s)| (*a, s.to_string())).collect()
}

#[test]
fn row_miss_then_hit_then_conflict() {
    let mut c = controller(RefreshMode::Off, PagePolicy::Open, 32);
    let parts = [
        (0, false, 0, 5, 0, 1),   // closed bank: ACT RD
        (100, false, 0, 5, 1, 1), // row hit: RD
        (200, false, 0, 6, 0, 1), // row conflict: PRE ACT RD
    ];
    let done = drive(&mut c, &parts, 1000);
    assert_eq!(
        log(&c),
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (15, "RD bg0.ba0 row 5 col 0"),
            (101, "RD bg0.ba0 row 5 col 1"),
            (201, "PRE bg0.ba0"),
            (215, "ACT bg0.ba0 row 6"),
            (229, "RD bg0.ba0 row 6 col 0"),
        ])
    );
    let latency: Vec<Cycle> = done
        .iter()
        .map(|d| d.at - parts[d.tag as usize].0)
        .collect();
    // overhead + tRCDRD + CL + BL; overhead + CL + BL; overhead + tRP + tRCDRD + CL + BL.
    assert_eq!(latency, [1 + 14 + 14 + 2, 1 + 14 + 2, 1 + 14 + 14 + 14 + 2]);
    let s = c.stats();
    assert_eq!((s.row_hits, s.row_misses, s.row_conflicts), (1, 1, 1));
}

#[test]
fn a_64_byte_request_is_two_column_accesses_tccd_l_apart() {
    let mut c = controller(RefreshMode::Off, PagePolicy::Open, 32);
    let done = drive(&mut c, &[(0, false, 0, 5, 2, 2)], 1000);
    assert_eq!(
        log(&c),
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (15, "RD bg0.ba0 row 5 col 2"),
            (19, "RD bg0.ba0 row 5 col 3")
        ])
    );
    assert_eq!(
        done,
        [Completion {
            tag: 0,
            at: 19 + 14 + 2
        }]
    );
}

#[test]
fn closed_page_precharges_when_no_request_hits_the_row() {
    let mut c = controller(RefreshMode::Off, PagePolicy::Closed, 32);
    drive(
        &mut c,
        &[(0, false, 0, 5, 0, 1), (0, false, 0, 5, 1, 1)],
        1000,
    );
    assert_eq!(
        log(&c),
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (15, "RD bg0.ba0 row 5 col 0"),
            (19, "RD bg0.ba0 row 5 col 1"),
            (35, "PRE bg0.ba0"), // tRAS after the ACT (tRTP after the RD is earlier)
        ])
    );
}

#[test]
fn older_hits_keep_their_row_against_a_conflict() {
    let mut c = controller(RefreshMode::Off, PagePolicy::Open, 32);
    // The conflict (row 6) is older than the second hit but must not close row 5 first.
    let parts = [
        (0, false, 0, 5, 0, 1),
        (2, false, 0, 6, 0, 1),
        (3, false, 0, 5, 1, 1),
    ];
    drive(&mut c, &parts, 1000);
    let kinds: Vec<String> = log(&c).into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        kinds,
        [
            "ACT bg0.ba0 row 5",
            "RD bg0.ba0 row 5 col 0",
            "RD bg0.ba0 row 5 col 1",
            "PRE bg0.ba0",
            "ACT bg0.ba0 row 6",
            "RD bg0.ba0 row 6 col 0"
        ]
    );
}

#[test]
fn all_bank_refresh_interleaves_and_requests_resume_after_trfc() {
    let mut c = controller(RefreshMode::AllBank, PagePolicy::Open, 32);
    let parts = [(3800, false, 0, 5, 0, 1), (3920, false, 1, 7, 0, 1)];
    let done = drive(&mut c, &parts, 5000);
    assert_eq!(
        log(&c),
        seq(&[
            (3801, "ACT bg0.ba0 row 5"),
            (3815, "RD bg0.ba0 row 5 col 0"),
            (3900, "PREA"), // REF due at tREFI; the open row is closed first
            (3914, "REF"),  // tRP after PREA
            (4264, "ACT bg0.ba1 row 7"), // tRFC after REF
            (4278, "RD bg0.ba1 row 7 col 0"),
        ])
    );
    assert_eq!(done[1].at, 4278 + 14 + 2);
}

#[test]
fn per_bank_refresh_picks_a_bank_nobody_waits_for() {
    let mut c = controller(RefreshMode::PerBank, PagePolicy::Open, 32);
    // Bank 0 is busy around the first due time (3900 / 16 = 243).
    let parts: Vec<Part> = (0..12)
        .map(|i| (200 + 8 * i, false, 0, 5, i as u32, 1))
        .collect();
    drive(&mut c, &parts, 400);
    let l = log(&c);
    assert!(l.contains(&(243, "REFpb bg0.ba1".to_string())), "{l:?}");
    // The reads to bank 0 go on every tCCD_L around it.
    let reads: Vec<Cycle> = l
        .iter()
        .filter(|(_, s)| s.starts_with("RD"))
        .map(|(a, _)| *a)
        .collect();
    assert_eq!(reads.len(), 12);
    assert!(reads.windows(2).all(|w| w[1] - w[0] <= 8), "{reads:?}");
}

#[test]
fn writes_drain_between_watermarks() {
    // Depth 8: drain starts at 6 writes (0.75) and stops at 2 (0.25) while reads wait.
    let mut c = controller(RefreshMode::Off, PagePolicy::Open, 8);
    let mut parts: Vec<Part> = (0..6).map(|i| (0, true, 0, 5, i, 1)).collect();
    parts.push((0, false, 0, 5, 9, 1));
    drive(&mut c, &parts, 1000);
    assert_eq!(
        log(&c),
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (13, "WR bg0.ba0 row 5 col 0"), // tRCDWR
            (17, "WR bg0.ba0 row 5 col 1"), // tCCD_L
            (21, "WR bg0.ba0 row 5 col 2"),
            (25, "WR bg0.ba0 row 5 col 3"), // two writes left: low watermark
            (40, "RD bg0.ba0 row 5 col 9"), // CWL + BL + tWTR_L after the last WR
            (53, "WR bg0.ba0 row 5 col 4"), // CL + BL + turnaround - CWL after the RD
            (57, "WR bg0.ba0 row 5 col 5"),
        ])
    );
}

#[test]
fn unloaded_read_latency_through_the_memory_system() {
    let p = hbm2();
    let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
    let addr = |row, col| {
        mapping
            .encode(&DramAddr {
                row,
                col,
                ..DramAddr::default()
            })
            .unwrap()
    };
    let miss = 1 + 14 + 14 + 2; // overhead + tRCDRD + CL + BL
    let hit = 1 + 14 + 2; // overhead + CL + BL
    let conflict = 1 + 14 + 14 + 14 + 2; // overhead + tRP + tRCDRD + CL + BL
    let cases = [
        // (requests (addr, arrival), expected (min, max) latency)
        (vec![(addr(5, 0), 0)], (miss, miss)),
        (vec![(addr(5, 0), 0), (addr(5, 2), 500)], (hit, miss)),
        (vec![(addr(5, 0), 0), (addr(6, 0), 500)], (miss, conflict)),
    ];
    for (reqs, (min, max)) in cases {
        for size in [32u32, 64] {
            let mut cfg = ControllerConfig::from_preset(&p);
            cfg.refresh = RefreshMode::Off;
            let mut sys = MemorySystem::new(&p, mapping.clone(), cfg);
            let stream = reqs.iter().map(|&(addr, arrival)| Request {
                addr,
                write: false,
                size,
                arrival,
            });
            let r = sys.run(stream, |_| {});
            assert_eq!(r.reads, reqs.len() as u64);
            // A 64-byte request's second column access issues tCCD_L (4) after the first.
            let extra = if size == 64 { 4 } else { 0 };
            assert_eq!(
                (r.read_latency_min, r.read_latency_max),
                (min + extra, max + extra),
                "size {size}"
            );
        }
    }
}

#[test]
fn nmc_engine_can_own_the_pseudo_channel() {
    let mut c = controller(RefreshMode::Off, PagePolicy::Open, 32);
    c.acquire_for_nmc(0);
    let mut done = Vec::new();
    let part = RequestPart {
        write: false,
        tag: 0,
        bank: 0,
        row: 5,
        col: 0,
        bursts: 1,
    };
    c.enqueue(0, part).unwrap();
    assert_eq!(c.step(10, &mut done), Cycle::MAX);
    assert!(
        c.log().is_empty(),
        "normal requests must wait while NMC owns the channel"
    );
    let ab = Command::AbAct { row: 9 };
    assert_eq!(c.earliest_external(&ab), 0);
    c.issue_external(&ab, 10).unwrap();
    let e = c.issue_external(&Command::AbRd { col: 0 }, 11).unwrap_err();
    assert!(e.to_string().contains("tRCDRD"), "{e}");
    c.issue_external(&Command::AbRd { col: 0 }, 24).unwrap();
    c.issue_external(&Command::PreAll, 60).unwrap();
    let at = c.release_from_nmc(60);
    drive(&mut c, &[], 200);
    let _ = at;
    let l = log(&c);
    assert_eq!(l[3], (74, "ACT bg0.ba0 row 5".to_string()), "{l:?}");
    assert_eq!(c.pseudo_channel().open_row(0), Some(5));
    let _ = BankId::new(0, 0);
}
