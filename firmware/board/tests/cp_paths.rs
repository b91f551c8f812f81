//! The CP's two paths decide the same: the fast path over the board's mapped view of
//! device memory against the general path (every word through the platform trait), on
//! the canned report and on random twists of a steady iteration.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::{functional, host_report_on, second_iteration};
use nmcp_board::{board, Board, DEVICE_BASE, WINDOW_BYTES};
use nmcp_firmware::cp::CpAction;
use nmcp_firmware::Event;

/// The CP's word-wise fast path over mapped memory and its general path (reads
/// through the trait, full decode) decide the same: identical functional fields.
#[test]
#[cfg_attr(
    feature = "hifive1",
    ignore = "virt's layout (two-packet rings, full window)"
)]
fn fast_and_general_paths_decide_the_same() {
    let fast = host_report_on(true);
    let general = host_report_on(false);
    let cp = |r: &str| {
        functional(r)
            .into_iter()
            // The decisions (only the fast path stops at a fixed decision and
            // looks at the rest in a follow-up event) and their fields; the paths
            // count their reads and visits differently.
            .filter(|l| l.starts_with("cp_decision") && !l.contains("_followup"))
            .map(|l| {
                l.split(' ')
                    .filter(|f| {
                        ![
                            "mem_accesses",
                            "bytes_read",
                            "model_cycles",
                            "visits",
                            "mapped_visits",
                            "mapped_dispatches",
                            "decoded",
                        ]
                        .iter()
                        .any(|k| f.starts_with(&format!("{k}=")))
                    })
                    .collect::<std::vec::Vec<_>>()
                    .join(" ")
            })
            .collect::<std::vec::Vec<_>>()
    };
    assert_eq!(cp(&fast).len(), 12);
    assert_eq!(cp(&fast), cp(&general));
}

/// What a queue's packet of the next iteration holds instead of its GEMM, for
/// [`mapped_and_general_paths_agree`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Twist {
    /// The GEMM as laid out.
    None,
    /// A kernel object no record lists.
    UnlistedKernel,
    /// A completion signal inside the queue rings.
    SignalInRings,
    /// The barrier bit (the queue has nothing outstanding: it resolves at once).
    Barrier,
    /// Not published yet (INVALID header).
    Unpublished,
    /// The other shape's record (its kernel objects are the same sample map's).
    OtherRecord,
    /// A reserved packet type.
    ReservedType,
}

fn twist() -> impl proptest::strategy::Strategy<Value = Twist> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Twist::UnlistedKernel),
        Just(Twist::SignalInRings),
        Just(Twist::Barrier),
        Just(Twist::Unpublished),
        Just(Twist::OtherRecord),
        Just(Twist::ReservedType),
    ]
}

/// Every CP record (queue, dispatch id, action) of a steady-state iteration of the
/// canned scenario with `twists` applied to the queues' packets, the rotation at
/// `rotation` and the doorbells of `rung` rung, run until the CP is idle: every
/// dispatched kernel placed and completed, every pending follow-up sent, and then
/// every doorbell rung once more. On the mapped view or the general path. The
/// dispatcher's latch holds `busy` other requests at the first doorbell, so it
/// refuses (`Busy`) what does not fit until the next event; and it refuses the first
/// `refusals` groups pushed into its FIFO whole (only the mapped view's steady lane
/// pushes; the general path never sees these refusals).
pub(crate) fn records_of(
    mapped: bool,
    twists: &[Twist],
    rotation: u8,
    rung: u32,
    busy: usize,
    refusals: u32,
) -> std::vec::Vec<(u8, u64, String)> {
    use nmcp_firmware::platform::{DeviceMemory, KernelDispatcher};
    use nmcp_isa::aql::{self, AQL_PACKET_BYTES};
    let mut mem = vec![0u8; WINDOW_BYTES];
    let (mut board, mut fw, s) = second_iteration(&mut mem, mapped);
    let ring_bytes = s.ring_packets as usize * AQL_PACKET_BYTES;
    let packet = |q: usize| DEVICE_BASE + (board::map::RINGS + q * ring_bytes + 64) as u64;
    for (q, &t) in twists.iter().enumerate() {
        let at = packet(q);
        let word = |b: &mut Board<'_>, off: usize| -> u32 {
            let mut w = [0u8; 4];
            b.read(at + off as u64, &mut w).unwrap();
            u32::from_le_bytes(w)
        };
        let put = |b: &mut Board<'_>, off: usize, v: &[u8]| b.write(at + off as u64, v).unwrap();
        match t {
            Twist::None => {}
            Twist::UnlistedKernel => {
                let bogus = DEVICE_BASE + board::map::KERNELS as u64 + 11 * 64;
                put(&mut board, aql::offset::KERNEL_OBJECT, &bogus.to_le_bytes());
            }
            Twist::SignalInRings => {
                let inside = DEVICE_BASE + board::map::RINGS as u64 + 8;
                put(
                    &mut board,
                    aql::offset::COMPLETION_SIGNAL,
                    &inside.to_le_bytes(),
                );
            }
            Twist::Barrier => {
                let h = word(&mut board, 0) | 1 << 8;
                put(&mut board, 0, &h.to_le_bytes());
            }
            Twist::Unpublished => {
                let h = (word(&mut board, 0) & !0xFF) | 1;
                put(&mut board, 0, &h.to_le_bytes());
            }
            Twist::OtherRecord => {
                // Queues alternate the two shapes: the neighbour's record.
                let other = packet(q ^ 1) + aql::offset::GEMM_EXT_ADDRESS as u64;
                let mut e = [0u8; 8];
                board.read(other, &mut e).unwrap();
                put(&mut board, aql::offset::GEMM_EXT_ADDRESS, &e);
            }
            Twist::ReservedType => {
                let h = (word(&mut board, 0) & !0xFF) | 7;
                put(&mut board, 0, &h.to_le_bytes());
            }
        }
    }
    fw.cp.set_rotation(rotation);
    board.ring(rung);
    board.refuse_pushed(refusals);
    for _ in 0..busy {
        let other = nmcp_firmware::platform::DispatchRequest {
            queue: 0,
            dispatch_id: 0,
            kernel_object: 0,
        };
        board.dispatch(&other).unwrap();
    }
    let mut events = vec![Event::Doorbell { queue: 31 }];
    let mut records = vec![];
    let mut rang_all = false;
    for _ in 0..1000 {
        let Some(ev) = events.pop() else {
            if fw.cp.has_pending_work() {
                events.push(Event::Deferred);
            } else if !rang_all {
                rang_all = true;
                board.ring(u32::MAX);
                events.push(Event::Doorbell { queue: 31 });
            } else {
                // What the dispatcher took, in order (the prefilled requests too).
                let st = &board.stats;
                records.push((
                    u8::MAX,
                    u64::from(st.dispatches),
                    format!("{:#x}", st.dispatch_hash),
                ));
                return records;
            }
            continue;
        };
        fw.handle(ev, &mut board).unwrap();
        board.settle();
        let mut placed = vec![];
        while let Some(r) = fw.cp.pop_record() {
            if let CpAction::Dispatched { .. } = r.action {
                placed.push((r.queue, r.dispatch_id));
            }
            records.push((r.queue, r.dispatch_id, format!("{:?}", r.action)));
        }
        // Completions after placements, the first placed kernel's last (the events
        // are a stack).
        for &(queue, dispatch_id) in &placed {
            events.push(Event::KernelCompleted {
                queue,
                dispatch_id,
                status: Ok(()),
            });
        }
        for &(queue, dispatch_id) in placed.iter().rev() {
            board.consume(queue, dispatch_id).unwrap();
            events.push(Event::KernelDispatched { queue, dispatch_id });
        }
    }
    unreachable!("the CP did not go idle within 1000 events");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
    /// The mapped view's fast paths (the steady-state decision on cached keys and its
    /// one-pass gather among them) against the general path (reads through the
    /// trait): on random twists of the queues' packets, rotations, doorbell sets, a
    /// dispatcher that refuses part of a group and one that refuses pushed groups
    /// whole, the same records for every queue,
    /// in the same order per queue, with the same CDs, predictions and kernel objects,
    /// and the same requests taken by the dispatcher, in the same order.
    #[test]
    #[cfg_attr(
        feature = "hifive1",
        ignore = "virt's layout (two-packet rings, full window)"
    )]
    fn mapped_and_general_paths_agree(
        // A few queues twisted (none in a fifth of the cases: the steady state).
        twisted in proptest::collection::vec((0usize..32, twist()), 0..5),
        rotation in 0u8..32,
        rung in proptest::prop_oneof![
            proptest::strategy::Just(u32::MAX),
            proptest::prelude::any::<u32>(),
        ],
        busy in proptest::prop_oneof![
            proptest::strategy::Just(0usize),
            20usize..32,
        ],
        // Groups the FIFO refuses whole (the lane's undo after a refusal).
        refusals in 0u32..3,
    ) {
        let mut twists = [Twist::None; 32];
        for &(q, t) in &twisted {
            twists[q] = t;
        }
        let sorted = |mut r: std::vec::Vec<(u8, u64, String)>| {
            // Per queue in order (a stable sort keeps each queue's own order).
            r.sort_by_key(|x| x.0);
            r
        };
        let fast = records_of(true, &twists, rotation, rung, busy, refusals);
        let general = records_of(false, &twists, rotation, rung, busy, refusals);
        // Every published packet has an outcome.
        let published = twists.iter().filter(|t| !matches!(t, Twist::Unpublished)).count();
        proptest::prop_assert!(fast.len() >= published, "{fast:?}");
        proptest::prop_assert_eq!(sorted(fast), sorted(general));
    }
}
