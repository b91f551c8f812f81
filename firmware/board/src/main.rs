//! The board binary: the unchanged firmware on `riscv32imac-unknown-none-elf`.
//!
//! It decodes the canned scenarios (postcard blobs made by `build.rs`), runs them through
//! the in-RAM platform of [`nmcp_board::board`], measures every firmware operation with
//! `minstret`/`mcycle` while a GPIO pin is high, prints one line per operation over
//! semihosting and exits QEMU (or halts a board's debugger session) with status 0, or 1
//! after printing `error: ...`.
//!
//! On the host this file is an empty `main`, so `cargo build --workspace` needs no RISC-V
//! toolchain.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(not(target_os = "none"))]
fn main() {}

#[cfg(target_os = "none")]
mod target {
    use core::convert::Infallible;
    use core::mem::MaybeUninit;
    use core::ptr::{addr_of_mut, NonNull};

    use embedded_hal::digital::{ErrorType, OutputPin};
    use nmcp_board::{board::Board, run_all, Blobs, Measured, Meter, WINDOW_BYTES};
    use nmcp_firmware::Firmware;
    use semihosting::println;

    /// Which machine this binary was linked for (printed first, so an expected file
    /// cannot be compared with the wrong machine's run).
    const MACHINE: &str = if cfg!(feature = "hifive1") {
        "sifive_e"
    } else {
        "virt"
    };

    /// Bytes of stack painted below `main`'s frame to find the deepest use.
    const STACK_PAINT_BYTES: usize = 64 * 1024;
    /// Leave this much below the current stack pointer unpainted (the painting loop's own
    /// frame and any interrupt prologue).
    const STACK_PAINT_GUARD: usize = 256;
    const STACK_PAINT: u32 = 0x5AC4_5AC4;

    static CP_BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cp_32q.postcard"));
    static LAMB_1T_BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lamb_1t.postcard"));
    static LAMB_4T_BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lamb_4t.postcard"));

    /// The device-memory window and the firmware live in `.bss`, so the ELF's section
    /// sizes show what the board must provide.
    static mut WINDOW: [u8; WINDOW_BYTES] = [0; WINDOW_BYTES];
    static mut FIRMWARE: MaybeUninit<Firmware> = MaybeUninit::uninit();

    /// On QEMU `virt` (no GPIO block) the "pin" is a RAM word; a logic analyser would
    /// watch a real output register instead.
    #[cfg(not(feature = "hifive1"))]
    static mut GPIO_OUTPUT: u32 = 0;

    /// FE310 GPIO0: `output_en` at +0x08, `output_val` at +0x0C.
    #[cfg(feature = "hifive1")]
    const GPIO0_BASE: usize = 0x1001_2000;
    /// GPIO 5 is header pin 13 on the HiFive1.
    #[cfg(feature = "hifive1")]
    const MEASURE_PIN: u32 = 5;

    /// One output pin of a memory-mapped GPIO output register.
    pub struct MmioPin {
        output: NonNull<u32>,
        mask: u32,
    }

    impl MmioPin {
        fn modify(&mut self, f: impl FnOnce(u32) -> u32) {
            // SAFETY: `output` points at a GPIO output register (or its RAM stand-in)
            // that only this pin writes.
            unsafe {
                let v = core::ptr::read_volatile(self.output.as_ptr());
                core::ptr::write_volatile(self.output.as_ptr(), f(v));
            }
        }
    }

    impl ErrorType for MmioPin {
        type Error = Infallible;
    }

    impl OutputPin for MmioPin {
        fn set_low(&mut self) -> Result<(), Infallible> {
            let m = self.mask;
            self.modify(|v| v & !m);
            Ok(())
        }
        fn set_high(&mut self) -> Result<(), Infallible> {
            let m = self.mask;
            self.modify(|v| v | m);
            Ok(())
        }
    }

    fn measure_pin() -> MmioPin {
        #[cfg(not(feature = "hifive1"))]
        {
            MmioPin {
                output: NonNull::from(unsafe { &mut *addr_of_mut!(GPIO_OUTPUT) }),
                mask: 1,
            }
        }
        #[cfg(feature = "hifive1")]
        {
            let mask = 1 << MEASURE_PIN;
            // SAFETY: FE310 GPIO0 registers; enable the pin as an output.
            unsafe {
                let en = (GPIO0_BASE + 0x08) as *mut u32;
                core::ptr::write_volatile(en, core::ptr::read_volatile(en) | mask);
            }
            MmioPin {
                output: NonNull::new((GPIO0_BASE + 0x0C) as *mut u32)
                    .unwrap_or(NonNull::dangling()),
                mask,
            }
        }
    }

    fn counters() -> Measured {
        Measured {
            instructions: riscv::register::minstret::read64(),
            cycles: riscv::register::mcycle::read64(),
        }
    }

    /// `minstret`/`mcycle` around a region, with the pin high inside it; the cost of an
    /// empty region (the counter reads themselves) is subtracted.
    struct CsrMeter {
        pin: MmioPin,
        t0: Measured,
        overhead: Measured,
        paint_low: usize,
        stack_top: usize,
    }

    impl Meter for CsrMeter {
        #[inline(always)]
        fn start(&mut self) {
            let _ = self.pin.set_high();
            self.t0 = counters();
        }

        #[inline(always)]
        fn stop(&mut self) -> Option<Measured> {
            let t1 = counters();
            let _ = self.pin.set_low();
            Some(Measured {
                instructions: (t1.instructions - self.t0.instructions)
                    .saturating_sub(self.overhead.instructions),
                cycles: (t1.cycles - self.t0.cycles).saturating_sub(self.overhead.cycles),
            })
        }

        fn stack_peak(&mut self) -> Option<u64> {
            let mut p = self.paint_low;
            // The lowest word no longer holding the paint is the deepest the stack went.
            while p < self.stack_top {
                // SAFETY: inside the painted, unused part of the stack region.
                if unsafe { core::ptr::read_volatile(p as *const u32) } != STACK_PAINT {
                    break;
                }
                p += 4;
            }
            Some((self.stack_top - p) as u64)
        }
    }

    extern "C" {
        static _stack_start: u8;
        static __estack: u8;
    }

    /// Paints the unused stack below the current frame; returns the lowest painted
    /// address and the top of the stack.
    #[inline(never)]
    fn paint_stack() -> (usize, usize) {
        let sp: usize;
        // SAFETY: reads the stack pointer.
        unsafe { core::arch::asm!("mv {}, sp", out(reg) sp) };
        // Linker symbols; only their addresses are used.
        let (top, bottom) = {
            (
                core::ptr::addr_of!(_stack_start) as usize,
                core::ptr::addr_of!(__estack) as usize,
            )
        };
        let high = sp - STACK_PAINT_GUARD;
        let low = high.saturating_sub(STACK_PAINT_BYTES).max(bottom) & !3;
        let mut p = low;
        while p < high {
            // SAFETY: below the live stack and above the end of .bss/.heap.
            unsafe { core::ptr::write_volatile(p as *mut u32, STACK_PAINT) };
            p += 4;
        }
        (low, top)
    }

    struct SemihostingOut;

    impl core::fmt::Write for SemihostingOut {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            semihosting::print!("{s}");
            Ok(())
        }
    }

    fn cycle_clock() -> u64 {
        riscv::register::mcycle::read64()
    }

    #[riscv_rt::entry]
    fn main() -> ! {
        let (paint_low, stack_top) = paint_stack();
        let mut meter = CsrMeter {
            pin: measure_pin(),
            t0: Measured::default(),
            overhead: Measured::default(),
            paint_low,
            stack_top,
        };
        meter.start();
        meter.overhead = meter.stop().unwrap_or_default();
        println!("nmcp-board machine={MACHINE}");
        // SAFETY: `main` runs once and is the only user of these statics.
        let (window, fw) = unsafe {
            (
                &mut *addr_of_mut!(WINDOW),
                (*addr_of_mut!(FIRMWARE)).write(Firmware::default()),
            )
        };
        let mut board = Board::new(window, cycle_clock);
        let blobs = Blobs {
            cp: CP_BLOB,
            lamb_1t: LAMB_1T_BLOB,
            lamb_4t: LAMB_4T_BLOB,
        };
        let status = match run_all(fw, &mut board, &mut meter, &blobs, &mut SemihostingOut) {
            Ok(()) => 0,
            Err(e) => {
                println!("error: {e}");
                1
            }
        };
        println!("exit status={status}");
        semihosting::process::exit(status)
    }
}
