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

#[cfg(all(target_os = "none", feature = "hifive1"))]
mod fe310;
#[cfg(all(target_os = "none", feature = "defmt"))]
mod rtt;

#[cfg(target_os = "none")]
mod target {
    #[cfg(not(feature = "hifive1"))]
    use core::convert::Infallible;
    use core::mem::MaybeUninit;
    use core::ptr::addr_of_mut;
    #[cfg(not(feature = "hifive1"))]
    use core::ptr::NonNull;

    use core::fmt::Write as _;
    #[cfg(not(feature = "hifive1"))]
    use embedded_hal::digital::ErrorType;
    use embedded_hal::digital::OutputPin;
    use nmcp_board::{board::Board, Blobs, Measured, Meter};
    use nmcp_firmware::Firmware;

    /// Which machine this binary was linked for (printed first, so an expected file
    /// cannot be compared with the wrong machine's run).
    const MACHINE: &str = if cfg!(feature = "hifive1-revb") {
        "sifive_e_revb"
    } else if cfg!(feature = "hifive1") {
        "sifive_e"
    } else {
        "virt"
    };

    /// Bytes of stack painted below a measured region's caller, enough for any handler.
    const STACK_PAINT_BYTES: usize = 32 * 1024;
    /// Left unpainted right below the caller's stack pointer: the painting function's own
    /// frame. A region that stays inside it reports this many bytes (an upper bound).
    const STACK_PAINT_GUARD: usize = 128;
    const STACK_PAINT: u32 = 0x5AC4_5AC4;

    #[cfg(not(feature = "hifive1"))]
    static CP_BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cp_32q.postcard"));
    /// The HiFive1 build's rings hold one packet each (its window fits 16 KiB of RAM).
    #[cfg(feature = "hifive1")]
    static CP_BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cp_32q_one_deep.postcard"));
    static LAMB_1T_BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lamb_1t.postcard"));
    static LAMB_4T_BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lamb_4t.postcard"));
    static LAMB_MORE_BLOBS: [&[u8]; 3] = [
        include_bytes!(concat!(env!("OUT_DIR"), "/lamb_8t.postcard")),
        include_bytes!(concat!(env!("OUT_DIR"), "/lamb_4t_nodecay.postcard")),
        include_bytes!(concat!(env!("OUT_DIR"), "/lamb_4t_3slot.postcard")),
    ];

    /// The device-memory window and the firmware live in `.bss`, so the ELF's section
    /// sizes show what the board must provide.
    /// Word alignment for the device-memory window (the CP reads it a word at a time).
    #[repr(C, align(8))]
    struct Aligned<const N: usize>([u8; N]);

    /// The RAM behind the device window (all of it on virt; on the HiFive1 build the
    /// parts a scenario reads, `nmcp_board::BACKED_WINDOW_BYTES`).
    static mut WINDOW: Aligned<{ nmcp_board::BACKED_WINDOW_BYTES }> =
        Aligned([0; nmcp_board::BACKED_WINDOW_BYTES]);
    static mut FIRMWARE: MaybeUninit<Firmware> = MaybeUninit::uninit();

    /// On QEMU `virt` (no GPIO block) the "pin" is a RAM word; a logic analyser would
    /// watch a real output register instead.
    #[cfg(not(feature = "hifive1"))]
    static mut GPIO_OUTPUT: u32 = 0;

    /// GPIO 5 is header pin 13 on the HiFive1.
    #[cfg(feature = "hifive1")]
    const MEASURE_PIN: u32 = 5;

    /// One output pin of a memory-mapped GPIO output register (virt: a RAM word).
    #[cfg(not(feature = "hifive1"))]
    pub struct MmioPin {
        output: NonNull<u32>,
        mask: u32,
    }

    #[cfg(not(feature = "hifive1"))]
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

    #[cfg(not(feature = "hifive1"))]
    impl ErrorType for MmioPin {
        type Error = Infallible;
    }

    #[cfg(not(feature = "hifive1"))]
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

    /// The pin that is high while a region is measured: on virt a RAM word, on the
    /// HiFive1 GPIO 5.
    #[cfg(not(feature = "hifive1"))]
    fn measure_pin() -> MmioPin {
        MmioPin {
            output: NonNull::from(unsafe { &mut *addr_of_mut!(GPIO_OUTPUT) }),
            mask: 1,
        }
    }

    #[cfg(feature = "hifive1")]
    fn measure_pin() -> crate::fe310::GpioPin {
        crate::fe310::GpioPin::output(MEASURE_PIN)
    }

    fn counters() -> Measured {
        Measured {
            instructions: riscv::register::minstret::read64(),
            cycles: riscv::register::mcycle::read64(),
        }
    }

    /// `minstret`/`mcycle` around a region, with the pin high inside it; the cost of an
    /// empty region (the counter reads themselves) is subtracted. Before each region the
    /// free stack below the caller is painted; after it, the deepest overwritten word
    /// gives the region's stack use.
    struct CsrMeter<P: OutputPin> {
        pin: P,
        t0: Measured,
        overhead: Measured,
        /// Stack pointer of the region's caller and the lowest painted address.
        sp: usize,
        paint_low: usize,
        peak: usize,
        /// Lowest stack address found written since the firmware was initialised.
        low_water: usize,
        /// Lowest address `main` painted (the sweeps start there).
        floor: usize,
        /// Stack used by the start-up (below the top of the stack), bytes.
        startup: usize,
    }

    impl<P: OutputPin> CsrMeter<P> {
        /// Finds the deepest word written since the last painting (the first word from
        /// the bottom of the stack that is not the paint) and lowers `low_water` to it.
        #[inline(never)]
        fn sweep(&mut self) {
            let mut p = self.floor;
            while p < self.low_water {
                // SAFETY: between the end of .bss/.heap and the lowest address known
                // to be in use: painted earlier, or in use now (read only).
                if unsafe { core::ptr::read_volatile(p as *const u32) } != STACK_PAINT {
                    break;
                }
                p += 4;
            }
            self.low_water = self.low_water.min(p);
        }
    }

    impl<P: OutputPin> Meter for CsrMeter<P> {
        #[inline(always)]
        fn start(&mut self) {
            let sp: usize;
            // SAFETY: reads the stack pointer.
            unsafe { core::arch::asm!("mv {}, sp", out(reg) sp) };
            self.sp = sp;
            // The previous region and whatever ran since may have gone deeper than
            // anything before: look before painting over it.
            self.sweep();
            self.paint_low = paint_stack(sp);
            let _ = self.pin.set_high();
            self.t0 = counters();
        }

        #[inline(always)]
        fn stop(&mut self) -> Option<Measured> {
            let t1 = counters();
            let _ = self.pin.set_low();
            let mut p = self.paint_low;
            let high = self.sp - STACK_PAINT_GUARD;
            while p < high {
                // SAFETY: inside the region painted by `start`, below every live frame.
                if unsafe { core::ptr::read_volatile(p as *const u32) } != STACK_PAINT {
                    break;
                }
                p += 4;
            }
            self.peak = self.peak.max(self.sp - p.min(high));
            Some(Measured {
                instructions: (t1.instructions - self.t0.instructions)
                    .saturating_sub(self.overhead.instructions),
                cycles: (t1.cycles - self.t0.cycles).saturating_sub(self.overhead.cycles),
            })
        }

        fn stack_peak(&mut self) -> Option<u64> {
            Some(self.peak as u64)
        }

        fn stack_high_water(&mut self) -> Option<u64> {
            self.sweep();
            let top = core::ptr::addr_of!(_stack_start) as usize;
            Some(top.saturating_sub(self.low_water) as u64)
        }

        fn stack_startup(&mut self) -> Option<u64> {
            Some(self.startup as u64)
        }
    }

    extern "C" {
        /// riscv-rt: the end of .bss/.heap (the lowest address the stack may use).
        static __estack: u8;
        /// riscv-rt: the top of the stack (the end of RAM).
        static _stack_start: u8;
    }

    /// Paints the free stack below `sp` (less the guard); returns the lowest painted
    /// address.
    #[inline(never)]
    fn paint_stack(sp: usize) -> usize {
        // A linker symbol; only its address is used.
        let bottom = core::ptr::addr_of!(__estack) as usize;
        let high = sp - STACK_PAINT_GUARD;
        let low = high.saturating_sub(STACK_PAINT_BYTES).max(bottom) & !3;
        let mut p = low;
        while p < high {
            // SAFETY: below the live stack and above the end of .bss/.heap.
            unsafe { core::ptr::write_volatile(p as *mut u32, STACK_PAINT) };
            p += 4;
        }
        low
    }

    /// The report channel: the host's stdout over semihosting `SYS_WRITE`, hand-written
    /// so that no panic path is linked (the `semihosting` crate's `write_all` slices and
    /// its `stdout()` asserts; `SYS_WRITE0` would reach QEMU's stderr instead).
    #[cfg(not(feature = "hifive1-revb"))]
    mod semihost {
        use core::sync::atomic::{AtomicIsize, Ordering};

        /// `SYS_OPEN` (parameter block: name, mode, name length; returns a handle or -1).
        const SYS_OPEN: usize = 0x01;
        /// `SYS_WRITE` (parameter block: handle, buffer, length; returns the bytes *not*
        /// written).
        const SYS_WRITE: usize = 0x05;
        /// `SYS_OPEN` mode 4 is "w": opening `:tt` with it gives the console's output.
        const MODE_W: usize = 4;
        /// The handle of `:tt` once opened; -1 until then (or when the host refused).
        static STDOUT: AtomicIsize = AtomicIsize::new(-1);

        /// One semihosting call: operation `op`, parameter register `arg`.
        ///
        /// # Safety
        /// `arg` must be what `op` expects (for the calls here, the address of a
        /// parameter block that lives across the call, whose buffers are valid).
        #[inline(never)]
        unsafe fn call(op: usize, arg: usize) -> isize {
            let ret: isize;
            // SAFETY: the RISC-V semihosting sequence (uncompressed, in one 16-byte
            // aligned group so it cannot straddle a page); the host reads the block
            // and returns in a0.
            unsafe {
                core::arch::asm!(
                    ".balign 16",
                    ".option push",
                    ".option norvc",
                    "slli x0, x0, 0x1f",
                    "ebreak",
                    "srai x0, x0, 0x7",
                    ".option pop",
                    inout("a0") op as isize => ret,
                    in("a1") arg,
                    options(nostack, preserves_flags),
                );
            }
            ret
        }

        /// The console's output handle, opened on first use.
        fn stdout() -> Option<usize> {
            let h = STDOUT.load(Ordering::Relaxed);
            if h >= 0 {
                return Some(h as usize);
            }
            let name = b":tt\0";
            let block = [name.as_ptr() as usize, MODE_W, 3];
            // SAFETY: a SYS_OPEN block naming a NUL-terminated 3-byte path.
            let h = unsafe { call(SYS_OPEN, block.as_ptr() as usize) };
            STDOUT.store(h, Ordering::Relaxed);
            usize::try_from(h).ok()
        }

        /// Writes all of `bytes`, looping over partial writes; `Err` when the host
        /// wrote nothing.
        pub fn write(bytes: &[u8]) -> Result<(), ()> {
            let fd = stdout().ok_or(())?;
            let mut rest = bytes;
            while !rest.is_empty() {
                let block = [fd, rest.as_ptr() as usize, rest.len()];
                // SAFETY: a SYS_WRITE block over `rest`, which outlives the call.
                let left = unsafe { call(SYS_WRITE, block.as_ptr() as usize) };
                let left = usize::try_from(left).map_err(|_| ())?;
                let written = rest.len().checked_sub(left).ok_or(())?;
                if written == 0 {
                    return Err(());
                }
                rest = rest.get(written..).ok_or(())?;
            }
            Ok(())
        }
    }

    /// The report over semihosting (QEMU runs, or a board with a debugger attached).
    #[cfg(not(feature = "hifive1-revb"))]
    struct SemihostingOut;

    /// Where the report goes: semihosting, or on the HiFive1 Rev B UART0 at the
    /// console rate (its USB serial port; QEMU's first serial port).
    #[cfg(not(feature = "hifive1-revb"))]
    fn report_out() -> SemihostingOut {
        SemihostingOut
    }

    #[cfg(feature = "hifive1-revb")]
    fn report_out() -> crate::fe310::Console<crate::fe310::Uart0> {
        crate::fe310::Console(crate::fe310::Uart0::new(
            crate::fe310::CORE_CLOCK_HZ,
            crate::fe310::CONSOLE_BAUD,
        ))
    }

    #[cfg(not(feature = "hifive1-revb"))]
    impl core::fmt::Write for SemihostingOut {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            // Straight to the host's stdout: no second formatting layer.
            semihost::write(s.as_bytes()).map_err(|()| core::fmt::Error)
        }
    }

    fn cycle_clock() -> u64 {
        riscv::register::mcycle::read64()
    }

    /// A panic prints its message over semihosting and exits with status 101. With the
    /// `no-panic` feature the handler instead calls a symbol no object defines: the
    /// release image then links only if the optimiser proved every panic unreachable.
    #[cfg(not(feature = "no-panic"))]
    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let _ = writeln!(report_out(), "panic: {info}");
        semihosting::process::exit(101)
    }

    #[cfg(feature = "no-panic")]
    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        extern "Rust" {
            /// Deliberately undefined (see the `no-panic` feature).
            fn nmcp_board_panic_is_reachable() -> !;
        }
        // SAFETY: never linked; a reachable call fails the link instead.
        unsafe { nmcp_board_panic_is_reachable() }
    }

    /// Initialises the firmware in its static, one part at a time (each out of line), so
    /// that no frame holds a whole `Firmware` (a 7.6 KiB temporary on a 16 KiB board).
    #[inline(never)]
    fn init_firmware(slot: &'static mut MaybeUninit<Firmware>) -> &'static mut Firmware {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` points at the static's storage (valid, aligned, unaliased); every
        // field of `Firmware` is written exactly once below (they are its only fields:
        // the destructuring in `_fields` fails to compile if one is added), after which
        // the value is initialised.
        unsafe {
            init_part(&mut *uninit(core::ptr::addr_of_mut!((*p).cp)));
            init_part(&mut *uninit(core::ptr::addr_of_mut!((*p).nmc)));
            init_part(&mut *uninit(core::ptr::addr_of_mut!((*p).t3)));
            slot.assume_init_mut()
        }
    }

    /// Every field of `Firmware` is named here, so a new one fails to compile until
    /// `init_firmware` initialises it too.
    #[allow(dead_code)]
    fn _fields(f: Firmware) {
        let Firmware {
            cp: _,
            nmc: _,
            t3: _,
        } = f;
    }

    /// `p` as a pointer to possibly uninitialised storage.
    fn uninit<T>(p: *mut T) -> *mut MaybeUninit<T> {
        p.cast()
    }

    /// Writes `T::default()` into `slot`.
    #[inline(never)]
    fn init_part<T: Default>(slot: &mut MaybeUninit<T>) {
        slot.write(T::default());
    }

    /// Paints the whole free stack, initialises the firmware in its static and runs
    /// the scenarios. Its own frame is small: the board, the meter and the report live
    /// in `run`'s, so the firmware's initialisation and the run do not stack up.
    #[riscv_rt::entry]
    fn main() -> ! {
        let sp: usize;
        // SAFETY: reads the stack pointer.
        unsafe { core::arch::asm!("mv {}, sp", out(reg) sp) };
        // Everything below `main`'s frame (less the guard) is painted before the first
        // frame of the start-up is pushed (the report's `startup_bytes`).
        let floor = paint_stack(sp);
        // The Rev B image sets its clock (the rate `mcycle` counts and the console's
        // divisor); the Rev A / QEMU-only builds keep what they start with.
        #[cfg(feature = "hifive1-revb")]
        crate::fe310::use_crystal_clock();
        // SAFETY: `main` runs once and is the only user of these statics.
        let (window, fw) = unsafe {
            (
                &mut (*addr_of_mut!(WINDOW)).0,
                init_firmware(&mut *addr_of_mut!(FIRMWARE)),
            )
        };
        #[cfg(feature = "defmt")]
        defmt::info!("nmcp-board machine={=str}", MACHINE);
        let status = run(window, fw, floor, sp.saturating_sub(STACK_PAINT_GUARD));
        #[cfg(feature = "defmt")]
        defmt::info!("exit status={=i32}", status);
        let _ = writeln!(report_out(), "exit status={status}");
        // On QEMU this ends the run; on a board without a debugger the semihosting call
        // traps and the core waits in riscv-rt's exception handler, the report sent.
        semihosting::process::exit(status)
    }

    /// Runs every scenario of this machine and returns the exit status. `main` painted
    /// the stack from `floor` up to `painted_top`.
    #[inline(never)]
    fn run(
        window: &'static mut [u8],
        fw: &'static mut Firmware,
        floor: usize,
        painted_top: usize,
    ) -> i32 {
        let mut meter = CsrMeter {
            pin: measure_pin(),
            t0: Measured::default(),
            overhead: Measured::default(),
            sp: 0,
            paint_low: 0,
            peak: 0,
            low_water: painted_top,
            floor,
            startup: 0,
        };
        // The start-up's depth (`main` painted everything below it), then the stack
        // below this frame painted afresh for the run's own high-water.
        meter.startup = meter.stack_high_water().unwrap_or(0) as usize;
        let sp: usize;
        // SAFETY: reads the stack pointer.
        unsafe { core::arch::asm!("mv {}, sp", out(reg) sp) };
        paint_stack(sp);
        meter.low_water = painted_top;
        meter.start();
        meter.overhead = meter.stop().unwrap_or_default();
        meter.peak = 0;
        let mut out = report_out();
        #[cfg(not(feature = "hifive1-revb"))]
        let _ = writeln!(out, "nmcp-board machine={MACHINE}");
        #[cfg(feature = "hifive1-revb")]
        let _ = writeln!(
            out,
            "nmcp-board machine={MACHINE} core_clock_hz={}",
            crate::fe310::CORE_CLOCK_HZ
        );
        let mut board = Board::new(window, cycle_clock);
        let blobs = Blobs {
            cp: CP_BLOB,
            lamb_1t: LAMB_1T_BLOB,
            lamb_4t: LAMB_4T_BLOB,
            lamb_more: &LAMB_MORE_BLOBS,
        };
        #[cfg(not(feature = "hifive1"))]
        let result = nmcp_board::run_all(fw, &mut board, &mut meter, &blobs, &mut out);
        #[cfg(feature = "hifive1")]
        let result = nmcp_board::run_small(fw, &mut board, &mut meter, &blobs, &mut out);
        match result {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(out, "error: {e}");
                1
            }
        }
    }
}
