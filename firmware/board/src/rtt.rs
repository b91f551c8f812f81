//! The `defmt` global logger of the board image: defmt frames (rzCOBS-encoded by
//! `defmt::Encoder`) written into a SEGGER RTT up-channel in RAM, which a debug probe
//! (J-Link's RTT, `probe-rs attach`) reads while the core runs; `defmt-print -e ELF`
//! decodes them. One hart, no interrupts: the logger needs no critical section beyond
//! refusing to nest.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Bytes of the up-channel's ring buffer.
const BUF_BYTES: usize = 128;

/// One RTT up-channel descriptor (SEGGER's layout).
#[repr(C)]
struct Channel {
    name: *const u8,
    buffer: *mut u8,
    size: u32,
    write: u32,
    read: u32,
    /// 0: skip a message that does not fit (never block the firmware).
    flags: u32,
}

/// The RTT control block a probe finds by its id string.
#[repr(C)]
struct ControlBlock {
    id: [u8; 16],
    max_up: u32,
    max_down: u32,
    up: Channel,
}

struct Rtt(UnsafeCell<ControlBlock>, UnsafeCell<[u8; BUF_BYTES]>);

// SAFETY: one hart; the logger below is the only writer and does not nest.
unsafe impl Sync for Rtt {}

#[no_mangle]
#[used]
static _SEGGER_RTT: Rtt = Rtt(
    UnsafeCell::new(ControlBlock {
        id: *b"SEGGER RTT\0\0\0\0\0\0",
        max_up: 1,
        max_down: 0,
        up: Channel {
            name: c"defmt".as_ptr().cast(),
            buffer: core::ptr::null_mut(),
            size: BUF_BYTES as u32,
            write: 0,
            read: 0,
            flags: 0,
        },
    }),
    UnsafeCell::new([0; BUF_BYTES]),
);

static TAKEN: AtomicBool = AtomicBool::new(false);
static mut ENCODER: defmt::Encoder = defmt::Encoder::new();

/// Appends `bytes` to the up-channel, dropping what does not fit.
fn put(bytes: &[u8]) {
    let cb = _SEGGER_RTT.0.get();
    let buf = _SEGGER_RTT.1.get().cast::<u8>();
    // SAFETY: the control block and buffer are this module's statics; the probe only
    // reads them and writes `read`, which is read volatile.
    unsafe {
        let up = core::ptr::addr_of_mut!((*cb).up);
        core::ptr::write_volatile(core::ptr::addr_of_mut!((*up).buffer), buf);
        let mut w = core::ptr::read_volatile(core::ptr::addr_of!((*up).write)) as usize;
        let r = core::ptr::read_volatile(core::ptr::addr_of!((*up).read)) as usize;
        for &b in bytes {
            let next = if w + 1 >= BUF_BYTES { 0 } else { w + 1 };
            if next == r {
                break;
            }
            core::ptr::write_volatile(buf.add(w.min(BUF_BYTES - 1)), b);
            w = next;
        }
        core::ptr::write_volatile(core::ptr::addr_of_mut!((*up).write), w as u32);
    }
}

#[defmt::global_logger]
struct Logger;

// SAFETY: `acquire` refuses to nest (a nested frame is dropped), so `ENCODER` has one
// user between `acquire` and `release`.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        if TAKEN.swap(true, Ordering::Acquire) {
            return;
        }
        // SAFETY: taken above.
        unsafe { (*core::ptr::addr_of_mut!(ENCODER)).start_frame(put) }
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: between `acquire` and `release`.
        unsafe { (*core::ptr::addr_of_mut!(ENCODER)).end_frame(put) }
        TAKEN.store(false, Ordering::Release);
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: between `acquire` and `release`.
        unsafe { (*core::ptr::addr_of_mut!(ENCODER)).write(bytes, put) }
    }
}
