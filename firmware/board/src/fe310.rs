//! The FE310's (SiFive HiFive1) clock, measurement pin and console, behind the
//! `embedded-hal` / `embedded-io` traits the harness uses: the core on the 16 MHz crystal
//! with the PLL bypassed, GPIO 5 as an `OutputPin`, and UART0 at 115 200 baud as an
//! `embedded_io::Write` (the Rev B's USB serial port). Another RISC-V board's HAL plugs in
//! by offering the same two traits.
//!
//! Register offsets are the FE310-G002 manual's (PRCI ch. 7, GPIO ch. 17, UART ch. 18).
//! QEMU's `sifive_e` models the PRCI's ready/lock bits as always set and sends UART0's
//! bytes to its first serial port, so the same code runs there.

// The Rev A image uses the pin only (its report stays on semihosting).
#![cfg_attr(not(feature = "hifive1-revb"), allow(dead_code))]

use core::convert::Infallible;

use embedded_hal::digital::{ErrorType, OutputPin};

/// The core clock after [`use_crystal_clock`]: the HiFive1's 16 MHz crystal (HFXOSC),
/// the PLL bypassed. `mcycle` counts at this rate on the board.
pub const CORE_CLOCK_HZ: u32 = 16_000_000;
/// The console rate of the HiFive1 Rev B's USB serial port.
pub const CONSOLE_BAUD: u32 = 115_200;

const PRCI: usize = 0x1000_8000;
const HFXOSCCFG: usize = PRCI + 0x04;
const PLLCFG: usize = PRCI + 0x08;
const PLLOUTDIV: usize = PRCI + 0x0C;
const HFXOSC_EN: u32 = 1 << 30;
const HFXOSC_RDY: u32 = 1 << 31;
const PLL_SEL: u32 = 1 << 16;
const PLL_REFSEL: u32 = 1 << 17;
const PLL_BYPASS: u32 = 1 << 18;
const PLLOUTDIV_BY1: u32 = 1 << 8;

const GPIO0: usize = 0x1001_2000;
const GPIO_OUTPUT_EN: usize = GPIO0 + 0x08;
const GPIO_OUTPUT_VAL: usize = GPIO0 + 0x0C;
const GPIO_IOF_EN: usize = GPIO0 + 0x38;
const GPIO_IOF_SEL: usize = GPIO0 + 0x3C;
/// UART0's RX and TX are GPIO 16 and 17, function IOF0.
const UART0_PINS: u32 = (1 << 16) | (1 << 17);

const UART0: usize = 0x1001_3000;
const UART_TXDATA: usize = UART0;
const UART_TXCTRL: usize = UART0 + 0x08;
const UART_DIV: usize = UART0 + 0x18;
/// `txdata` reads with this bit set while the transmit FIFO is full.
const TXDATA_FULL: u32 = 1 << 31;

fn read(addr: usize) -> u32 {
    // SAFETY: every address passed here is an FE310 MMIO register (constants above).
    unsafe { core::ptr::read_volatile(addr as *const u32) }
}

fn write(addr: usize, v: u32) {
    // SAFETY: as in `read`.
    unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
}

/// Runs the core from the 16 MHz crystal with the PLL bypassed, whatever clock the
/// bootloader left: the rate `mcycle` counts and the UART divisor are then known.
pub fn use_crystal_clock() {
    write(HFXOSCCFG, read(HFXOSCCFG) | HFXOSC_EN);
    // The crystal starts within a few milliseconds; bounded so a missing crystal leaves
    // the clock as it was rather than hanging.
    let mut spins = 0u32;
    while read(HFXOSCCFG) & HFXOSC_RDY == 0 && spins < 1_000_000 {
        spins += 1;
    }
    if read(HFXOSCCFG) & HFXOSC_RDY == 0 {
        return;
    }
    write(PLLOUTDIV, PLLOUTDIV_BY1);
    write(PLLCFG, read(PLLCFG) | PLL_REFSEL | PLL_BYPASS | PLL_SEL);
}

/// One pin of GPIO0 as an output (high while a region is measured).
pub struct GpioPin {
    mask: u32,
}

impl GpioPin {
    /// GPIO `pin` (0..32) of GPIO0, enabled as an output, low.
    pub fn output(pin: u32) -> Self {
        let mask = 1u32.checked_shl(pin).unwrap_or(0);
        write(GPIO_OUTPUT_VAL, read(GPIO_OUTPUT_VAL) & !mask);
        write(GPIO_OUTPUT_EN, read(GPIO_OUTPUT_EN) | mask);
        Self { mask }
    }
}

impl ErrorType for GpioPin {
    type Error = Infallible;
}

impl OutputPin for GpioPin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        write(GPIO_OUTPUT_VAL, read(GPIO_OUTPUT_VAL) & !self.mask);
        Ok(())
    }
    fn set_high(&mut self) -> Result<(), Infallible> {
        write(GPIO_OUTPUT_VAL, read(GPIO_OUTPUT_VAL) | self.mask);
        Ok(())
    }
}

/// UART0, transmit only (the report goes one way).
pub struct Uart0;

impl Uart0 {
    /// UART0 on its pins at `baud` for a peripheral clock of `clock_hz`: one stop bit,
    /// transmitter on. The FE310 divides by `div + 1`.
    pub fn new(clock_hz: u32, baud: u32) -> Self {
        let div = (clock_hz + baud / 2)
            .checked_div(baud)
            .unwrap_or(1)
            .saturating_sub(1);
        write(GPIO_IOF_SEL, read(GPIO_IOF_SEL) & !UART0_PINS);
        write(GPIO_IOF_EN, read(GPIO_IOF_EN) | UART0_PINS);
        write(UART_DIV, div);
        write(UART_TXCTRL, 1);
        Self
    }
}

impl embedded_io::ErrorType for Uart0 {
    type Error = Infallible;
}

impl embedded_io::Write for Uart0 {
    /// Queues bytes until the transmit FIFO is full (at least one: waits for room).
    fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        let mut n = 0;
        for &b in buf {
            if read(UART_TXDATA) & TXDATA_FULL != 0 {
                if n > 0 {
                    break;
                }
                while read(UART_TXDATA) & TXDATA_FULL != 0 {}
            }
            write(UART_TXDATA, u32::from(b));
            n += 1;
        }
        Ok(n)
    }

    /// Waits until the transmit FIFO has room again (the FE310 shows no "empty" flag
    /// besides the interrupt watermark; the last bytes leave within a character time).
    fn flush(&mut self) -> Result<(), Infallible> {
        while read(UART_TXDATA) & TXDATA_FULL != 0 {}
        Ok(())
    }
}

/// A console line writer over any `embedded_io::Write`: `\n` goes out as `\r\n`, as a
/// serial terminal expects (the host's report reader drops the `\r`).
pub struct Console<W>(pub W);

impl<W: embedded_io::Write> Console<W> {
    /// Writes all of `bytes`; a writer that takes nothing is an error (never a panic:
    /// `embedded_io::Write::write_all` panics on a zero-length write).
    fn put(&mut self, mut bytes: &[u8]) -> core::fmt::Result {
        while !bytes.is_empty() {
            let n = self.0.write(bytes).map_err(|_| core::fmt::Error)?;
            if n == 0 {
                return Err(core::fmt::Error);
            }
            bytes = bytes.get(n..).ok_or(core::fmt::Error)?;
        }
        Ok(())
    }
}

impl<W: embedded_io::Write> core::fmt::Write for Console<W> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for (i, line) in s.split('\n').enumerate() {
            if i > 0 {
                self.put(b"\r\n")?;
            }
            self.put(line.as_bytes())?;
        }
        Ok(())
    }
}
