//! Logging shim (embassy style): the rest of the crate never names `defmt` directly, so a
//! host build without the `defmt` feature links, and a board build with it logs.
#![allow(unused_macros, unused_imports)]

macro_rules! trace {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::trace!($($arg)*);
    }};
}

macro_rules! debug {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::debug!($($arg)*);
    }};
}

macro_rules! warn {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::warn!($($arg)*);
    }};
}
