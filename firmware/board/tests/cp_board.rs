//! The CP's behaviour on the board's platform: doorbells, the dispatcher's FIFO,
//! consumed slots and kernel objects checked at dispatch.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::{blob, first_decision, second_iteration};
use nmcp_board::suite::cp::drain_cp;
use nmcp_board::{board, scenario, Board, BOARD_QUEUES, DEVICE_BASE, WINDOW_BYTES};
use nmcp_firmware::cp::CpAction;
use nmcp_firmware::{Event, Firmware};

/// A doorbell makes the CP look at the rung queues only (its own and the bitmap's),
/// not at all 32.
#[test]
#[cfg_attr(
    feature = "hifive1",
    ignore = "virt's layout (two-packet rings, full window)"
)]
fn a_doorbell_visits_only_the_rung_queues() {
    let mut mem = vec![0u8; WINDOW_BYTES];
    let mut board = Board::new(&mut mem, || 0);
    let mut fw = Box::<Firmware>::default();
    let s = blob(&scenario::canned_cp());
    first_decision(&mut fw, &mut board, &s);
    let before = fw.cp.work();
    fw.handle(Event::Doorbell { queue: 5 }, &mut board).unwrap();
    assert_eq!(fw.cp.work().since(&before).queue_visits, 1);
    let before = fw.cp.work();
    board.ring((1 << 7) | (1 << 9));
    fw.handle(Event::Doorbell { queue: 5 }, &mut board).unwrap();
    assert_eq!(fw.cp.work().since(&before).queue_visits, 3);
    // The bitmap was read and cleared.
    let before = fw.cp.work();
    fw.handle(Event::Doorbell { queue: 5 }, &mut board).unwrap();
    assert_eq!(fw.cp.work().since(&before).queue_visits, 1);
}

/// The dispatcher takes a pushed group without walking it and checks each entry's
/// queue when it takes the entries (`Board::settle`): an entry naming no board queue
/// is counted in `stray_requests`, neither hashed nor a dispatch; a valid one is
/// both. A `from` beyond the FIFO is refused.
#[test]
fn a_stray_fifo_entry_is_counted_when_the_dispatcher_takes_it() {
    use nmcp_firmware::platform::{DispatchError, DispatchRequest, KernelDispatcher};
    let mut mem = vec![0u8; WINDOW_BYTES];
    let mut board = Board::new(&mut mem, || 0);
    let fresh = board.stats.dispatch_hash;
    let push = |board: &mut Board<'_>, queue: usize| {
        let f = board
            .mapped_fifo()
            .expect("a word-aligned window is offered");
        let from = f.fifo.len();
        f.fifo
            .push(DispatchRequest {
                queue: queue as u8,
                dispatch_id: 7,
                kernel_object: 0x1000,
            })
            .unwrap();
        from
    };
    let from = push(&mut board, BOARD_QUEUES);
    assert_eq!(board.dispatch_pushed(from), Ok(()));
    assert_eq!(
        board.dispatch_pushed(from + 2),
        Err(DispatchError::Unsupported)
    );
    board.settle();
    assert_eq!(board.stats.stray_requests, 1);
    assert_eq!(board.stats.dispatches, 0);
    assert_eq!(board.stats.dispatch_hash, fresh);
    let from = push(&mut board, BOARD_QUEUES - 1);
    assert_eq!(board.dispatch_pushed(from), Ok(()));
    board.settle();
    assert_eq!(board.stats.stray_requests, 1);
    assert_eq!(board.stats.dispatches, 1);
    assert_ne!(board.stats.dispatch_hash, fresh);
}

/// The fast path takes a valid header at a queue's head as a published packet
/// (without reading the write index), because the packet processor writes INVALID
/// back into every slot it consumes (`Board::consume`). With one-packet rings the
/// next packet's slot is the one just consumed: rung again with nothing new
/// published, the CP dispatches nothing (were the old header still there, it would
/// dispatch every GEMM a second time); once the next iteration is published, the
/// same decision as the first.
#[test]
fn a_consumed_slot_is_not_taken_for_a_new_packet() {
    let mut mem = vec![0u8; WINDOW_BYTES];
    let mut board = Board::new(&mut mem, || 0);
    let mut fw = Box::<Firmware>::default();
    let s = scenario::canned_cp_one_deep();
    let b = blob(&s);
    let mut done = first_decision(&mut fw, &mut board, &b);
    let first = done.len();
    assert_eq!(first, 8);
    drain_cp(&mut fw, &mut board, &mut done).unwrap();
    assert!(fw.cp.pop_record().is_none());
    // Every slot was consumed; nothing new is published.
    board.settle();
    let before = board.stats.dispatches;
    board.ring(u32::MAX);
    fw.handle(Event::Doorbell { queue: 31 }, &mut board)
        .unwrap();
    assert!(
        fw.cp.pop_record().is_none(),
        "a consumed packet was dispatched again"
    );
    board.settle();
    assert_eq!(board.stats.dispatches, before);
    // The next iteration, in the same slots.
    board.lay_out_cp_at(&s, 1).unwrap();
    fw.cp.set_rotation(0);
    board.ring(u32::MAX);
    fw.handle(Event::Doorbell { queue: 31 }, &mut board)
        .unwrap();
    let mut ids = vec![];
    while let Some(r) = fw.cp.pop_record() {
        if let CpAction::Dispatched { cd, .. } = r.action {
            assert_eq!(cd, 8);
            ids.push(r.dispatch_id);
        }
    }
    assert_eq!(ids, vec![1; 8]);
}

/// A GEMM of a known shape is classified from its header word and record address
/// alone; its kernel object is checked when it is dispatched. One its record does
/// not list is rejected then, with the reason the full decode gives it, and the rest
/// of the group still runs at the decided CD (one member fewer) — on the fast path
/// (mapped view) and on the general path alike.
#[test]
#[cfg_attr(
    feature = "hifive1",
    ignore = "virt's layout (two-packet rings, full window)"
)]
fn an_unlisted_kernel_object_is_rejected_at_dispatch_and_the_group_goes_on() {
    use nmcp_firmware::cp::{RejectCode, RejectReason};
    use nmcp_firmware::platform::DeviceMemory;
    for mapped in [true, false] {
        let mut mem = vec![0u8; WINDOW_BYTES];
        let (mut board, mut fw, s) = second_iteration(&mut mem, mapped);
        // Queue 2's packet (id 1: ring slot 1) names a kernel descriptor no record
        // lists.
        let ring_bytes = s.ring_packets as usize * 64;
        let ko_addr = DEVICE_BASE + (board::map::RINGS + 2 * ring_bytes + 64 + 32) as u64;
        let bogus = DEVICE_BASE + board::map::KERNELS as u64 + 11 * 64;
        board.write(ko_addr, &bogus.to_le_bytes()).unwrap();
        fw.cp.set_rotation(0);
        board.ring(u32::MAX);
        fw.handle(Event::Doorbell { queue: 31 }, &mut board)
            .unwrap();
        let (mut dispatched, mut rejected) = (vec![], vec![]);
        while let Some(r) = fw.cp.pop_record() {
            match r.action {
                CpAction::Dispatched { cd, swapped, .. } => dispatched.push((r.queue, cd, swapped)),
                CpAction::Rejected(reason) => rejected.push((r.queue, reason)),
                CpAction::BarrierResolved => {}
            }
        }
        assert_eq!(
            rejected,
            vec![(2, RejectReason::KernelNotListed { address: bogus })],
            "mapped={mapped}"
        );
        let queues: Vec<u8> = dispatched.iter().map(|d| d.0).collect();
        assert_eq!(queues, vec![0, 4, 6, 8, 10, 12, 14], "mapped={mapped}");
        assert!(dispatched.iter().all(|&(_, cd, sw)| cd == 8 && sw));
        let signal = DEVICE_BASE
            + (board::map::QUEUE_WORDS + 2 * board::map::QUEUE_WORDS_STRIDE + board::map::SIGNAL)
                as u64;
        let mut v = [0u8; 8];
        board.read(signal, &mut v).unwrap();
        assert_eq!(
            i64::from_le_bytes(v),
            RejectCode::KernelNotListed.signal_value()
        );
        // The queue's next event looks at its next packet.
        assert!(fw.cp.has_pending_work());
    }
}
