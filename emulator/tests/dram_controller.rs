//! Controller sequence tests: exact command sequences with cycles for row hits, misses,
//! conflicts, 64-byte requests, closed page, refresh interleaving and write draining, and
//! the unloaded read latency formula through the whole memory system.
//!
//! hbm2-2000 numbers used below: command overhead 1, tRCDRD 14, tRCDWR 12, CL 14, CWL 5,
//! BL 2, tRP 14, tRAS 34, tRTP 5, tCCD_L 4, tREFI 3900, tRFC 350, tREFI/16 = 243.

use nmcp_emulator::hbm::config::{PagePolicy, RefreshMode};
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, Command, Cycle, DramAddr, HbmPreset};
use nmcp_emulator::memctrl::{
    Access, ColumnLog, Controller, ControllerConfig, ControllerObserver, IssuedColumn, Mca,
    MemCompletion, MemorySystem, Request, RequestId, RoundRobin, Source, TrafficClass,
};
use nmcp_emulator::sim::Component;
use nmcp_isa::nmc::DType;

const R: Access = Access::Read;
const W: Access = Access::Write;
const COMPUTE: TrafficClass = TrafficClass::Compute;
const COMM: TrafficClass = TrafficClass::Communication;

fn hbm2() -> HbmPreset {
    HbmPreset::builtin("hbm2-2000").unwrap()
}

/// A memory system with the given settings and the stream mapping, command log on in
/// pseudo-channel 0 (where every request below goes).
fn system(refresh: RefreshMode, page: PagePolicy, depth: usize) -> MemorySystem {
    let p = hbm2();
    let mut cfg = ControllerConfig::with_depth(&p, depth);
    cfg.refresh = refresh;
    cfg.page_policy = page;
    let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
    let mut sys = MemorySystem::new(&p, mapping, cfg);
    sys.controller_mut(0).unwrap().set_logging(true);
    sys
}

/// A request to submit: (arrival, access, bank index in pseudo-channel 0, row, col,
/// bursts); a request of two bursts is 64 bytes (col even), otherwise 32.
type Part = (Cycle, Access, usize, u32, u32, u8);

/// The request of a part, in pseudo-channel 0 of the stream mapping.
fn request(sys: &MemorySystem, &(at, access, bank, row, col, bursts): &Part) -> Request {
    let d = DramAddr {
        bank_group: bank as u32 / 4,
        bank: bank as u32 % 4,
        row,
        col,
        ..DramAddr::default()
    };
    let addr = sys.mapping().encode(&d).unwrap();
    Request {
        access,
        ..Request::read(addr, 32 * u32::from(bursts), at)
    }
}

/// Submits `reqs` at their arrival cycles through the stepping API and runs until the
/// system is idle and `until` has passed; returns the completions in finishing order.
fn drive_requests(sys: &mut MemorySystem, reqs: &[Request], until: Cycle) -> Vec<MemCompletion> {
    let mut done = Vec::new();
    for r in reqs {
        sys.advance_until(r.arrival, &mut done);
        sys.submit(r).expect("the queues have room");
    }
    while let Some(t) = sys.next_wake() {
        if t > until && sys.is_idle() {
            break;
        }
        sys.advance_until(t, &mut done);
    }
    done
}

/// [`drive_requests`] for parts.
fn drive(sys: &mut MemorySystem, parts: &[Part], until: Cycle) -> Vec<MemCompletion> {
    let reqs: Vec<Request> = parts.iter().map(|p| request(sys, p)).collect();
    drive_requests(sys, &reqs, until)
}

fn c0(sys: &MemorySystem) -> &Controller {
    &sys.controllers()[0]
}

fn log(c: &Controller) -> Vec<(Cycle, String)> {
    c.log().iter().map(|l| (l.at, l.cmd.to_string())).collect()
}

fn seq(items: &[(Cycle, &str)]) -> Vec<(Cycle, String)> {
    items.iter().map(|(a, s)| (*a, s.to_string())).collect()
}

#[test]
fn row_miss_then_hit_then_conflict() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    let parts = [
        (0, R, 0, 5, 0, 1),   // closed bank: ACT RD
        (100, R, 0, 5, 1, 1), // row hit: RD
        (200, R, 0, 6, 0, 1), // row conflict: PRE ACT RD
    ];
    let done = drive(&mut sys, &parts, 1000);
    assert_eq!(
        log(c0(&sys)),
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (15, "RD bg0.ba0 row 5 col 0"),
            (101, "RD bg0.ba0 row 5 col 1"),
            (201, "PRE bg0.ba0"),
            (215, "ACT bg0.ba0 row 6"),
            (229, "RD bg0.ba0 row 6 col 0"),
        ])
    );
    let latency: Vec<Cycle> = done.iter().map(|d| d.finish - d.arrival).collect();
    let ids: Vec<RequestId> = done.iter().map(|d| d.id).collect();
    assert_eq!(ids, [RequestId(0), RequestId(1), RequestId(2)]);
    // overhead + tRCDRD + CL + BL; overhead + CL + BL; overhead + tRP + tRCDRD + CL + BL.
    assert_eq!(latency, [1 + 14 + 14 + 2, 1 + 14 + 2, 1 + 14 + 14 + 14 + 2]);
    let s = c0(&sys).stats();
    assert_eq!((s.row_hits, s.row_misses, s.row_conflicts), (1, 1, 1));
}

#[test]
fn a_64_byte_request_is_two_column_accesses_tccd_l_apart() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    let done = drive(&mut sys, &[(0, R, 0, 5, 2, 2)], 1000);
    assert_eq!(
        log(c0(&sys)),
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (15, "RD bg0.ba0 row 5 col 2"),
            (19, "RD bg0.ba0 row 5 col 3")
        ])
    );
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].accepted, done[0].finish), (0, 19 + 14 + 2));
}

#[test]
fn closed_page_precharges_when_no_request_hits_the_row() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Closed, 32);
    drive(&mut sys, &[(0, R, 0, 5, 0, 1), (0, R, 0, 5, 1, 1)], 1000);
    assert_eq!(
        log(c0(&sys)),
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
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    // The conflict (row 6) is older than the second hit but must not close row 5 first.
    let parts = [(0, R, 0, 5, 0, 1), (2, R, 0, 6, 0, 1), (3, R, 0, 5, 1, 1)];
    drive(&mut sys, &parts, 1000);
    let kinds: Vec<String> = log(c0(&sys)).into_iter().map(|(_, s)| s).collect();
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
    let mut sys = system(RefreshMode::AllBank, PagePolicy::Open, 32);
    let parts = [(3800, R, 0, 5, 0, 1), (3920, R, 1, 7, 0, 1)];
    let done = drive(&mut sys, &parts, 5000);
    assert_eq!(
        log(c0(&sys)),
        seq(&[
            (3801, "ACT bg0.ba0 row 5"),
            (3815, "RD bg0.ba0 row 5 col 0"),
            (3900, "PREA"), // REF due at tREFI; the open row is closed first
            (3914, "REF"),  // tRP after PREA
            (4264, "ACT bg0.ba1 row 7"), // tRFC after REF
            (4278, "RD bg0.ba1 row 7 col 0"),
        ])
    );
    assert_eq!(done[1].finish, 4278 + 14 + 2);
}

#[test]
fn per_bank_refresh_picks_a_bank_nobody_waits_for() {
    let mut sys = system(RefreshMode::PerBank, PagePolicy::Open, 32);
    // Bank 0 is busy around the first due time (3900 / 16 = 243).
    let parts: Vec<Part> = (0..12)
        .map(|i| (200 + 8 * i, R, 0, 5, i as u32, 1))
        .collect();
    drive(&mut sys, &parts, 400);
    let l = log(c0(&sys));
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
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 8);
    let mut parts: Vec<Part> = (0..6).map(|i| (0, W, 0, 5, i, 1)).collect();
    parts.push((0, R, 0, 5, 9, 1));
    drive(&mut sys, &parts, 1000);
    assert_eq!(
        log(c0(&sys)),
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
            let stream = reqs
                .iter()
                .map(|&(addr, arrival)| Request::read(addr, size, arrival));
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
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.controller_mut(0).unwrap().acquire_for_nmc(0);
    let mut done = Vec::new();
    let r = request(&sys, &(0, R, 0, 5, 0, 1));
    sys.submit(&r).unwrap();
    sys.advance_until(10, &mut done);
    assert_eq!(sys.next_wake(), None, "an NMC-owned controller sleeps");
    assert!(
        c0(&sys).log().is_empty(),
        "normal requests must wait while NMC owns the channel"
    );
    let c = sys.controller_mut(0).unwrap();
    let ab = Command::AbAct { row: 9 };
    assert_eq!(c.earliest_external(&ab), 0);
    c.issue_external(&ab, 10).unwrap();
    let e = c.issue_external(&Command::AbRd { col: 0 }, 11).unwrap_err();
    assert!(e.to_string().contains("tRCDRD"), "{e}");
    c.issue_external(&Command::AbRd { col: 0 }, 24).unwrap();
    c.issue_external(&Command::PreAll, 60).unwrap();
    let at = c.release_from_nmc(60);
    sys.wake_at(0, at);
    drive_requests(&mut sys, &[], 200);
    let l = log(c0(&sys));
    assert_eq!(l[3], (74, "ACT bg0.ba0 row 5".to_string()), "{l:?}");
    assert_eq!(c0(&sys).pseudo_channel().open_row(0), Some(5));
}

#[test]
fn updates_share_the_write_queue_and_issue_upd_tccdwl_apart() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 8);
    let upd = Access::Update(DType::F32);
    // Two updates and a write to one bank: the first UPD reads the column before it
    // stores, so it waits tRCDRD (not tRCDWR) after the ACT; the second UPD and then the
    // WR follow tCCDWL (8) apart. All three go through the write queue (drained when no
    // read waits).
    let parts = [
        (0, upd, 0, 5, 0, 1),
        (0, upd, 0, 5, 1, 1),
        (0, W, 0, 5, 2, 1),
    ];
    let done = drive(&mut sys, &parts, 1000);
    assert_eq!(
        log(c0(&sys)),
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (15, "UPD bg0.ba0 row 5 col 0"), // tRCDRD
            (23, "UPD bg0.ba0 row 5 col 1"), // tCCDWL
            (31, "WR bg0.ba0 row 5 col 2"),  // tCCDWL
        ])
    );
    let access: Vec<Access> = done.iter().map(|d| d.access).collect();
    assert_eq!(access, [upd, upd, W]);
    let s = c0(&sys).stats();
    assert_eq!(s.writes, 3, "updates are write-queue entries");
    assert_eq!(s.bytes_by.get(2, COMPUTE), 64);
    assert_eq!(s.bytes_by.get(1, COMPUTE), 32);
    let r = sys.report(sys.now());
    assert_eq!((r.updates, r.writes, r.requests), (2, 1, 3));
    assert_eq!(r.commands["UPD"], 2);
    assert_eq!(r.bytes_by_class["compute"]["update"], 64);
}

/// Row hits of two classes to one open row, queued compute first.
fn two_class_hits(sys: &MemorySystem, n: u32) -> Vec<Request> {
    let mut reqs: Vec<Request> = (0..n).map(|i| request(sys, &(0, R, 0, 5, i, 1))).collect();
    reqs.extend((0..n).map(|i| request(sys, &(0, R, 0, 5, n + i, 1)).with_class(COMM)));
    reqs
}

fn served_classes(sys: &MemorySystem) -> Vec<TrafficClass> {
    let log = sys.controllers()[0].observer_as::<ColumnLog>().unwrap();
    log.issued.iter().map(|c| c.class).collect()
}

#[test]
fn default_arbiter_is_class_blind_fr_fcfs() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.set_observers(|_| Box::new(ColumnLog::default()));
    let reqs = two_class_hits(&sys, 4);
    drive_requests(&mut sys, &reqs, 1000);
    assert_eq!(served_classes(&sys), [[COMPUTE; 4], [COMM; 4]].concat());
    // The same requests in one class give the same command sequence.
    let mut one = system(RefreshMode::Off, PagePolicy::Open, 32);
    let same: Vec<Request> = reqs.iter().map(|r| r.with_class(COMPUTE)).collect();
    drive_requests(&mut one, &same, 1000);
    assert_eq!(log(c0(&sys)), log(c0(&one)));
    assert_eq!(sys.report(sys.now()).arbiter, "fr-fcfs");
}

#[test]
fn round_robin_alternates_two_classes() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.set_arbiter(|_| Box::new(RoundRobin::new()));
    sys.set_observers(|_| Box::new(ColumnLog::default()));
    let reqs = two_class_hits(&sys, 4);
    drive_requests(&mut sys, &reqs, 1000);
    assert_eq!(
        served_classes(&sys),
        [COMPUTE, COMM, COMPUTE, COMM, COMPUTE, COMM, COMPUTE, COMM]
    );
    // Still every tCCD_L: alternating costs no bandwidth.
    let reads: Vec<Cycle> = log(c0(&sys))
        .iter()
        .filter(|(_, s)| s.starts_with("RD"))
        .map(|(a, _)| *a)
        .collect();
    assert!(reads.windows(2).all(|w| w[1] - w[0] == 4), "{reads:?}");
    assert_eq!(sys.report(sys.now()).arbiter, "round-robin");
}

#[test]
fn mca_serves_communication_only_when_compute_thins_out_or_starves() {
    // Threshold 2: communication waits while 2 or more compute entries are queued.
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.set_arbiter(|_| Box::new(Mca::new(2, 1_000)));
    sys.set_observers(|_| Box::new(ColumnLog::default()));
    // Communication first (older), then compute: MCA serves compute first anyway.
    let mut reqs: Vec<Request> = (0..3)
        .map(|i| request(&sys, &(0, R, 0, 5, i, 1)).with_class(COMM))
        .collect();
    reqs.extend((0..6).map(|i| request(&sys, &(0, R, 0, 5, 3 + i, 1))));
    drive_requests(&mut sys, &reqs, 1000);
    let classes = served_classes(&sys);
    // Compute goes first until one entry is left (below the threshold), then
    // communication is second tier: it issues whenever compute has nothing ready.
    assert_eq!(&classes[..5], [COMPUTE; 5], "{classes:?}");
    assert_eq!(classes.iter().filter(|&&c| c == COMM).count(), 3);

    // Anti-starvation: with compute arriving steadily above the threshold, communication
    // still goes after the limit.
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.set_arbiter(|_| Box::new(Mca::new(1, 100)));
    sys.set_observers(|_| Box::new(ColumnLog::default()));
    let mut reqs = vec![request(&sys, &(0, R, 0, 5, 0, 1)).with_class(COMM)];
    // Compute arrives twice as fast as one bank serves it (every 2 cycles, tCCD_L 4).
    reqs.extend((0..30).map(|i| request(&sys, &(2 * i, R, 0, 5, 1 + i as u32, 1))));
    drive_requests(&mut sys, &reqs, 1000);
    let log = sys.controllers()[0].observer_as::<ColumnLog>().unwrap();
    let comm = log.issued.iter().find(|c| c.class == COMM).unwrap();
    assert!(
        (100..200).contains(&comm.at),
        "communication served at {}",
        comm.at
    );
    assert!(log
        .issued
        .iter()
        .any(|c| c.class == COMPUTE && c.at > comm.at));
}

#[test]
fn mca_drains_communication_at_a_kernel_boundary() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.set_arbiter(|_| Box::new(Mca::new(1, 1_000_000)));
    sys.set_observers(|_| Box::new(ColumnLog::default()));
    let mut done = Vec::new();
    sys.submit(&request(&sys, &(0, R, 0, 5, 0, 1)).with_class(COMM))
        .unwrap();
    for i in 0..4 {
        sys.submit(&request(&sys, &(0, R, 0, 5, 1 + i, 1))).unwrap();
    }
    sys.advance_until(20, &mut done);
    // Compute above the threshold holds communication back...
    assert!(served_classes(&sys).iter().all(|&c| c == COMPUTE));
    sys.kernel_boundary();
    sys.advance_until(200, &mut done);
    assert!(
        served_classes(&sys).contains(&COMM),
        "drained at the boundary"
    );
    assert_eq!(done.len(), 5);
}

/// Counts issued updates per (workgroup, wavefront), like T3's tracker.
#[derive(Debug, Clone, Default)]
struct UpdateCounter {
    counts: std::collections::BTreeMap<(u32, u8), u32>,
    columns: u32,
}

impl ControllerObserver for UpdateCounter {
    fn on_issue(&mut self, c: &IssuedColumn) {
        self.columns += 1;
        if let (Access::Update(_), Some(s)) = (c.access, c.source) {
            if c.last {
                *self.counts.entry((s.workgroup, s.wavefront)).or_default() += 1;
            }
        }
    }
}

#[test]
fn an_observer_sees_every_update_by_workgroup_and_wavefront() {
    let p = hbm2();
    let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
    let mut sys = MemorySystem::new(&p, mapping, ControllerConfig::from_preset(&p));
    sys.set_observers(|_| Box::new(UpdateCounter::default()));
    let mut expected = std::collections::BTreeMap::new();
    let mut reqs = Vec::new();
    let mut addr = 0u64;
    for wg in 0..5u32 {
        for wf in 0..4u8 {
            let n = 3 + (wg * 4 + u32::from(wf)) % 7;
            expected.insert((wg, wf), n);
            for _ in 0..n {
                let source = Source {
                    gpu: 0,
                    workgroup: wg,
                    wavefront: wf,
                };
                reqs.push(Request::update(addr, 64, DType::F16, 0).with_source(source));
                // Reads in between, seen as columns but not counted.
                reqs.push(Request::read(addr + (1 << 20), 64, 0));
                addr += 4096 + 64;
            }
        }
    }
    let r = sys.run(reqs.iter().copied(), |_| {});
    let mut seen = std::collections::BTreeMap::new();
    let mut columns = 0;
    for c in sys.controllers() {
        let u = c.observer_as::<UpdateCounter>().unwrap();
        columns += u.columns;
        for (k, v) in &u.counts {
            *seen.entry(*k).or_insert(0) += v;
        }
    }
    // A 64-byte update split over two pseudo-channels counts once per part; this
    // mapping keeps both halves in one row, so once per request.
    assert_eq!(seen, expected);
    assert_eq!(u64::from(columns), r.commands["UPD"] + r.commands["RD"]);
    assert_eq!(
        r.updates,
        expected.values().map(|&n| u64::from(n)).sum::<u64>()
    );
}

#[test]
fn an_observer_is_told_class_source_and_address() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.set_observers(|_| Box::new(ColumnLog::default()));
    let source = Source {
        gpu: 1,
        workgroup: 7,
        wavefront: 3,
    };
    let r = request(&sys, &(0, Access::Update(DType::Bf16), 2, 9, 4, 2))
        .with_class(COMM)
        .with_source(source);
    drive_requests(&mut sys, &[r], 1000);
    let log = sys.controllers()[0].observer_as::<ColumnLog>().unwrap();
    let cols: Vec<(u32, bool)> = log.issued.iter().map(|c| (c.col, c.last)).collect();
    assert_eq!(cols, [(4, false), (5, true)]);
    for c in &log.issued {
        assert_eq!(c.pseudo_channel, 0);
        assert_eq!(c.bank.to_string(), "bg0.ba2");
        assert_eq!(
            (c.row, c.access, c.class),
            (9, Access::Update(DType::Bf16), COMM)
        );
        assert_eq!((c.source, c.addr), (Some(source), r.addr));
    }
}

#[test]
fn stepping_by_hand_matches_run() {
    let p = hbm2();
    let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
    let cfg = ControllerConfig::from_preset(&p);
    let reqs: Vec<Request> = nmcp_emulator::trace::Synthetic::new(
        nmcp_emulator::trace::Pattern::Random,
        5_000,
        64,
        p.capacity_bytes(),
        0.3,
        9,
    )
    .enumerate()
    .map(|(i, r)| Request {
        arrival: i as Cycle / 3,
        ..r
    })
    .collect();
    let mut a = MemorySystem::new(&p, mapping.clone(), cfg.clone());
    let ra = a.run(reqs.iter().copied(), |_| {});

    // The same stream with submit / next_wake / advance_until, as an owner of time would.
    let mut b = MemorySystem::new(&p, mapping, cfg);
    let mut done = Vec::new();
    let mut pending = reqs.iter().peekable();
    loop {
        let now = b.now();
        while let Some(r) = pending.peek() {
            if r.arrival > now || b.submit(r).is_err() {
                break;
            }
            pending.next();
        }
        let next_arrival = pending.peek().map(|r| r.arrival.max(now + 1));
        let next = match (b.next_wake(), next_arrival) {
            (Some(w), Some(a)) => w.min(a),
            (Some(w), None) if !b.is_idle() => w,
            (None, Some(a)) => a,
            _ => break,
        };
        b.advance_until(next, &mut done);
    }
    let rb = b.report(done.iter().map(|d| d.finish).max().unwrap());
    assert_eq!(done.len(), reqs.len());
    assert_eq!(
        (
            rb.reads,
            rb.writes,
            rb.bytes,
            rb.cycles,
            rb.commands.clone()
        ),
        (
            ra.reads,
            ra.writes,
            ra.bytes,
            ra.cycles,
            ra.commands.clone()
        )
    );
    assert_eq!(rb.read_latency_mean, ra.read_latency_mean);
    let mut ids: Vec<u64> = done.iter().map(|d| d.id.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..reqs.len() as u64).collect::<Vec<_>>());
    assert!(done
        .iter()
        .all(|d| d.finish > d.accepted && d.accepted >= d.arrival));
}

#[test]
fn the_memory_system_is_a_component_on_the_tick_axis() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    let clock = sys.clock();
    assert_eq!(clock.hz(), 1_000_000_000, "hbm2-2000: tCK 1 ns");
    assert_eq!(Component::next_wake(&sys), None);
    sys.submit(&request(&sys, &(0, R, 0, 5, 0, 1))).unwrap();
    assert_eq!(
        Component::next_wake(&sys),
        Some(1_000),
        "the ACT at cycle 1"
    );
    let mut out = Vec::new();
    Component::advance(&mut sys, 30_999, &mut out);
    assert!(out.is_empty(), "the read finishes at cycle 31");
    Component::advance(&mut sys, 31_000, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].finish, 31);
    assert_eq!(sys.now(), 31);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// T3's MCA under a saturating compute stream (random rows and banks, arriving
    /// faster than the pseudo-channel serves them): no communication column command
    /// waits longer than the anti-starvation limit plus one row switch and the queue's
    /// column ahead of it, measured from the later of its arrival and the previous
    /// communication issue.
    #[test]
    fn mca_never_starves_communication_beyond_its_limit(
        limit in 50u64..400,
        threshold in 1usize..8,
        seed in proptest::prelude::any::<u64>(),
    ) {
        let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
        sys.set_arbiter(move |_| Box::new(Mca::new(threshold, limit)));
        sys.set_observers(|_| Box::new(ColumnLog::default()));
        let mut s = seed | 1;
        let mut next = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; s };
        let mut reqs = Vec::new();
        let mut comm_arrivals = Vec::new();
        for i in 0..24u64 {
            let at = i * 3;
            let bank = (next() % 16) as usize;
            let row = (next() % 8) as u32;
            reqs.push(request(&sys, &(at, R, bank, row, (i % 32) as u32, 1)));
            if i % 6 == 0 {
                let r = request(&sys, &(at, R, (next() % 16) as usize, 9, (i % 32) as u32, 1)).with_class(COMM);
                comm_arrivals.push(at);
                reqs.push(r);
            }
        }
        drive_requests(&mut sys, &reqs, 10_000);
        let log = sys.controllers()[0].observer_as::<ColumnLog>().unwrap();
        let comm: Vec<Cycle> = log.issued.iter().filter(|c| c.class == COMM).map(|c| c.at).collect();
        proptest::prop_assert_eq!(comm.len(), comm_arrivals.len());
        // Worst case after the limit: a precharge and activate (tRP + tRCD) and the column
        // already scheduled, generously 3 x (14 + 14) cycles on hbm2-2000.
        let slack = 84;
        let mut prev = 0;
        for (at, arr) in comm.iter().zip(&comm_arrivals) {
            let from = prev.max(*arr);
            proptest::prop_assert!(*at <= from + limit + slack,
                "communication issued at {at}, waiting since {from}, limit {limit}");
            prev = *at;
        }
    }
}

// ---- Shared command interface and the look-ahead window (issue 15) ----

/// A request to pseudo-channel `pc` of channel 0 (the stream mapping).
fn request_pc(
    sys: &MemorySystem,
    pc: u32,
    &(at, access, bank, row, col, bursts): &Part,
) -> Request {
    let d = DramAddr {
        pc,
        bank_group: bank as u32 / 4,
        bank: bank as u32 % 4,
        row,
        col,
        ..DramAddr::default()
    };
    let addr = sys.mapping().encode(&d).unwrap();
    Request {
        access,
        ..Request::read(addr, 32 * u32::from(bursts), at)
    }
}

#[test]
fn two_pseudo_channels_of_a_channel_contend_for_the_command_buses() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.controller_mut(1).unwrap().set_logging(true);
    // Two closed-bank reads in each pseudo-channel, all visible at cycle 1.
    let reqs: Vec<Request> = [(0, 0), (1, 0), (0, 4), (1, 4)]
        .iter()
        .map(|&(pc, bank)| request_pc(&sys, pc, &(0, R, bank, 5, 0, 1)))
        .collect();
    drive_requests(&mut sys, &reqs, 1000);
    let l0 = log(c0(&sys));
    let l1 = log(&sys.controllers()[1]);
    // Row bus: an ACT holds it two cycles and the pseudo-channels take turns (pc0 has
    // priority first, then pc1, ...); each pseudo-channel's own tRRD (4) also applies.
    assert_eq!(
        l0,
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (5, "ACT bg1.ba0 row 5"), // tRRD_S after its first ACT
            (15, "RD bg0.ba0 row 5 col 0"),
            (19, "RD bg1.ba0 row 5 col 0"),
        ])
    );
    assert_eq!(
        l1,
        seq(&[
            (3, "ACT bg0.ba0 row 5"), // the row bus is free two cycles after pc0's ACT
            (7, "ACT bg1.ba0 row 5"),
            (17, "RD bg0.ba0 row 5 col 0"),
            (21, "RD bg1.ba0 row 5 col 0"),
        ])
    );
}

#[test]
fn contending_pseudo_channels_alternate_on_the_column_bus() {
    let mut sys = system(RefreshMode::Off, PagePolicy::Open, 32);
    sys.controller_mut(1).unwrap().set_logging(true);
    // Open one row in each bank group of both pseudo-channels, then many hits to them.
    let mut reqs = Vec::new();
    for pc in 0..2 {
        for g in 0..4 {
            reqs.push(request_pc(&sys, pc, &(0, R, 4 * g, 5, 0, 1)));
        }
    }
    for i in 1..9 {
        for pc in 0..2 {
            reqs.push(request_pc(
                &sys,
                pc,
                &(200, R, 4 * ((i % 4) as usize), 5, i, 1),
            ));
        }
    }
    drive_requests(&mut sys, &reqs, 2000);
    let mut rds: Vec<(Cycle, usize)> = Vec::new();
    for pc in 0..2 {
        rds.extend(
            sys.controllers()[pc]
                .log()
                .iter()
                .filter(|l| l.at > 200 && l.cmd.kind() == nmcp_emulator::hbm::CommandKind::Rd)
                .map(|l| (l.at, pc)),
        );
    }
    rds.sort_unstable();
    // One column command per cycle in the channel, the pseudo-channels alternating, and
    // each at its tCCD_S = 2 pace: the column bus is busy every cycle.
    let cycles: Vec<Cycle> = rds.iter().map(|r| r.0).collect();
    assert_eq!(cycles, (201..217).collect::<Vec<Cycle>>(), "{rds:?}");
    assert!(rds.windows(2).all(|w| w[0].1 != w[1].1), "{rds:?}");
}

/// A read opens bank 0's row 5; six writes to row 6 of the same bank then start a drain.
fn read_then_conflicting_writes(activated: usize) -> Vec<(Cycle, String)> {
    let p = hbm2();
    let mut cfg = ControllerConfig::with_depth(&p, 8);
    cfg.refresh = RefreshMode::Off;
    cfg.activated_per_bank = activated;
    let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
    let mut sys = MemorySystem::new(&p, mapping, cfg);
    sys.controller_mut(0).unwrap().set_logging(true);
    let mut parts: Vec<Part> = vec![(0, R, 0, 5, 0, 1)];
    parts.extend((0..6).map(|i| (2, W, 0, 6, i, 1)));
    drive(&mut sys, &parts, 1000);
    log(c0(&sys))
}

#[test]
fn without_look_ahead_a_write_drain_closes_the_row_a_read_just_opened() {
    let l = read_then_conflicting_writes(0);
    assert_eq!(
        l,
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (35, "PRE bg0.ba0"), // the drain's miss: tRAS after the read's ACT
            (49, "ACT bg0.ba0 row 6"),
            (61, "WR bg0.ba0 row 6 col 0"),
            (65, "WR bg0.ba0 row 6 col 1"),
            (69, "WR bg0.ba0 row 6 col 2"),
            (73, "WR bg0.ba0 row 6 col 3"), // two left and a read waits: drain stops
            (96, "PRE bg0.ba0"),            // CWL + BL + tWR after the last WR
            (110, "ACT bg0.ba0 row 5"),     // the read's row again
            (124, "RD bg0.ba0 row 5 col 0"),
            (144, "PRE bg0.ba0"), // tRAS after the re-ACT: a second ACT for row 5
            (158, "ACT bg0.ba0 row 6"),
            (170, "WR bg0.ba0 row 6 col 4"),
            (174, "WR bg0.ba0 row 6 col 5"),
        ])
    );
}

#[test]
fn with_look_ahead_the_activated_read_is_served_during_the_drain() {
    let l = read_then_conflicting_writes(1);
    assert_eq!(
        l,
        seq(&[
            (1, "ACT bg0.ba0 row 5"),
            (15, "RD bg0.ba0 row 5 col 0"), // served from the look-ahead window mid-drain
            (35, "PRE bg0.ba0"),            // only then may the write's miss close the row
            (49, "ACT bg0.ba0 row 6"),
            (61, "WR bg0.ba0 row 6 col 0"),
            (65, "WR bg0.ba0 row 6 col 1"),
            (69, "WR bg0.ba0 row 6 col 2"),
            (73, "WR bg0.ba0 row 6 col 3"),
            (77, "WR bg0.ba0 row 6 col 4"),
            (81, "WR bg0.ba0 row 6 col 5"),
        ])
    );
}

#[test]
fn the_look_ahead_window_holds_activated_requests_beyond_the_queue() {
    let p = hbm2();
    let mut cfg = ControllerConfig::with_depth(&p, 2);
    cfg.refresh = RefreshMode::Off;
    let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
    let mut sys = MemorySystem::new(&p, mapping, cfg);
    let a = request(&sys, &(0, R, 0, 5, 0, 1));
    let b = request(&sys, &(0, R, 1, 5, 0, 1));
    let c = request(&sys, &(0, R, 2, 5, 0, 1));
    sys.submit(&a).unwrap();
    sys.submit(&b).unwrap();
    assert!(sys.submit(&c).is_err(), "two entries fill a queue of two");
    let mut done = Vec::new();
    // At cycle 1 the first request's ACT issues: it moves to the look-ahead window.
    sys.advance_until(1, &mut done);
    sys.submit(&c)
        .expect("the activated request no longer counts");
}
