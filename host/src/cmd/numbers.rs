//! Value parsers for the commands' number options: every float is finite and inside the
//! range the model can use, refused by clap (exit 2) with the option and the value.

/// A float, finite, or why not.
fn finite(s: &str) -> Result<f64, String> {
    let x: f64 = s.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
    if x.is_finite() {
        Ok(x)
    } else {
        Err(format!("{x}: must be a finite number"))
    }
}

/// A finite number > 0.
pub fn positive_f64(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 0.0 => Ok(x),
        x => Err(format!("{x}: must be a positive number")),
    }
}

/// A finite number >= 0.
pub fn non_negative_f64(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 0.0 => Ok(x),
        x => Err(format!("{x}: must be a number >= 0")),
    }
}

/// A fraction in [0, 1].
pub fn fraction_f64(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if (0.0..=1.0).contains(&x) => Ok(x),
        x => Err(format!("{x}: must be in [0, 1]")),
    }
}

/// A percentage in (0, 100): a share of an iteration that is neither none nor all of it.
pub fn share_percent(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 0.0 && x < 100.0 => Ok(x),
        x => Err(format!("{x}: must be a percentage above 0 and below 100")),
    }
}

/// An `f32` option: finite as an `f32` too (1e39 is not).
fn to_f32(x: f64) -> Result<f32, String> {
    let y = x as f32;
    if y.is_finite() {
        Ok(y)
    } else {
        Err(format!("{x:e}: beyond the f32 range"))
    }
}

/// A finite `f32` > 0 (learning rate, epsilon, trust clamp).
pub fn positive_f32(s: &str) -> Result<f32, String> {
    let y = to_f32(positive_f64(s)?)?;
    if y > 0.0 {
        Ok(y)
    } else {
        Err(format!(
            "{s}: rounds to 0 as an f32; must be a positive number"
        ))
    }
}

/// A finite `f32` >= 0 (weight decay; a gradient-norm clip, 0 = off).
pub fn non_negative_f32(s: &str) -> Result<f32, String> {
    to_f32(non_negative_f64(s)?)
}

/// An exponential decay rate in [0, 1) (Adam/LAMB beta1, beta2: 1 divides by zero in the
/// bias correction).
pub fn decay_rate_f32(s: &str) -> Result<f32, String> {
    let y = to_f32(finite(s)?)?;
    if (0.0..1.0).contains(&y) {
        Ok(y)
    } else {
        Err(format!("{s}: must be in [0, 1)"))
    }
}

/// Longest duration option, ns: one second. A link latency, a workgroup's time or a
/// reduction round trip beyond it is no machine's, and far larger finite values (1e300)
/// overflow the simulators' integer clocks or leave them stepping through empty time.
pub const MAX_DURATION_NS: f64 = 1e9;

/// Bandwidth options' range in GB/s (bytes per ns): 0.01 (a slow serial link) to 10^6
/// (beyond any memory); below it a transfer takes longer than the clocks can count.
pub const BANDWIDTH_GBPS: (f64, f64) = (0.01, 1e6);

/// A duration in ns in [0, [`MAX_DURATION_NS`]].
pub fn duration_ns(s: &str) -> Result<f64, String> {
    match non_negative_f64(s)? {
        x if x <= MAX_DURATION_NS => Ok(x),
        x => Err(format!(
            "{x} ns: above 1 s ({MAX_DURATION_NS} ns), the longest duration taken"
        )),
    }
}

/// A duration in ns in (0, [`MAX_DURATION_NS`]].
pub fn positive_duration_ns(s: &str) -> Result<f64, String> {
    positive_f64(s)?;
    duration_ns(s)
}

/// A bandwidth in GB/s within [`BANDWIDTH_GBPS`].
pub fn bandwidth_gbps(s: &str) -> Result<f64, String> {
    let (lo, hi) = BANDWIDTH_GBPS;
    match positive_f64(s)? {
        x if (lo..=hi).contains(&x) => Ok(x),
        x => Err(format!("{x} GB/s: must be in [{lo}, {hi}]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_and_out_of_range_values_are_refused_with_the_value() {
        for bad in ["nan", "NaN", "inf", "-inf", "1e999"] {
            assert!(positive_f64(bad).unwrap_err().contains("finite"), "{bad}");
        }
        assert!(positive_f64("0")
            .unwrap_err()
            .contains("0: must be a positive"));
        assert!(non_negative_f64("-1").unwrap_err().contains("-1"));
        assert!(fraction_f64("1.5").unwrap_err().contains("[0, 1]"));
        assert!(share_percent("100").is_err() && share_percent("0").is_err());
        assert!(positive_f32("1e39").unwrap_err().contains("f32"));
        assert!(positive_f32("1e-50").unwrap_err().contains("rounds to 0"));
        assert!(decay_rate_f32("1").is_err() && decay_rate_f32("-0.1").is_err());
        assert_eq!(decay_rate_f32("0.999"), Ok(0.999));
        assert_eq!(non_negative_f32("0"), Ok(0.0));
        assert_eq!(share_percent("7"), Ok(7.0));
        assert!(positive_f64("x").unwrap_err().contains("\"x\""));
        assert!(duration_ns("1e300").unwrap_err().contains("above 1 s"));
        assert_eq!(duration_ns("1e9"), Ok(1e9));
        assert_eq!(duration_ns("0"), Ok(0.0));
        assert!(positive_duration_ns("0").unwrap_err().contains("positive"));
        assert!(bandwidth_gbps("1e-300")
            .unwrap_err()
            .contains("[0.01, 1000000]"));
        assert!(bandwidth_gbps("1e7").is_err());
        assert_eq!(bandwidth_gbps("75"), Ok(75.0));
    }

    type Parser = (
        &'static str,
        fn(&str) -> Result<f64, String>,
        fn(f64) -> bool,
    );

    /// Each parser with the range its `Ok` values must lie in.
    fn parsers() -> [Parser; 7] {
        // The array's type is given, so each function item and closure is coerced to the
        // tuple's fn pointer.
        [
            ("positive_f64", positive_f64, |x| x > 0.0),
            ("non_negative_f64", non_negative_f64, |x| x >= 0.0),
            ("fraction_f64", fraction_f64, |x| (0.0..=1.0).contains(&x)),
            ("share_percent", share_percent, |x| x > 0.0 && x < 100.0),
            (
                "positive_f32",
                |s| positive_f32(s).map(f64::from),
                |x| x > 0.0 && x <= f64::from(f32::MAX),
            ),
            (
                "non_negative_f32",
                |s| non_negative_f32(s).map(f64::from),
                |x| (0.0..=f64::from(f32::MAX)).contains(&x),
            ),
            (
                "decay_rate_f32",
                |s| decay_rate_f32(s).map(f64::from),
                |x| (0.0..1.0).contains(&x),
            ),
        ]
    }

    fn number_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            any::<f64>().prop_map(|x| x.to_string()),
            any::<f32>().prop_map(|x| format!("{x:e}")),
            Just("nan".to_string()),
            Just("-inf".to_string()),
            "[-+0-9.eE]{0,12}",
            ".{0,8}",
        ]
    }

    proptest::proptest! {
        /// Any text is accepted as a finite value in the parser's range, or refused with
        /// a message of the form `VALUE: why`.
        #[test]
        fn every_parser_accepts_in_range_or_refuses_with_the_value(s in number_text()) {
            for (name, parse, in_range) in parsers() {
                match parse(&s) {
                    Ok(x) => proptest::prop_assert!(x.is_finite() && in_range(x), "{name}({s:?}) = {x}"),
                    Err(e) => proptest::prop_assert!(!e.is_empty() && e.contains(':'), "{name}({s:?}): {e:?}"),
                }
            }
        }
    }
}

/// serde adapters of these parsers, for typed scenario options (`scenario::parsed`).
pub mod de {
    crate::scenario::parsed!(pub(crate) mod positive_f64 = crate::cmd::numbers::positive_f64 => f64);
    crate::scenario::parsed!(pub(crate) mod non_negative_f64 = crate::cmd::numbers::non_negative_f64 => f64);
    crate::scenario::parsed!(pub(crate) mod fraction_f64 = crate::cmd::numbers::fraction_f64 => f64);
    crate::scenario::parsed!(pub(crate) mod share_percent = crate::cmd::numbers::share_percent => f64);
    crate::scenario::parsed!(pub(crate) mod positive_f32 = crate::cmd::numbers::positive_f32 => f32);
    crate::scenario::parsed!(pub(crate) mod non_negative_f32 = crate::cmd::numbers::non_negative_f32 => f32);
    crate::scenario::parsed!(pub(crate) mod decay_rate_f32 = crate::cmd::numbers::decay_rate_f32 => f32);
    crate::scenario::parsed!(pub(crate) mod duration_ns = crate::cmd::numbers::duration_ns => f64);
    crate::scenario::parsed!(pub(crate) mod positive_duration_ns = crate::cmd::numbers::positive_duration_ns => f64);
    crate::scenario::parsed!(pub(crate) mod bandwidth_gbps = crate::cmd::numbers::bandwidth_gbps => f64);
}
