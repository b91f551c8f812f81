//! The check that a functional LAMB step's result is finite, naming the tensor, array,
//! element and value when it is not.

use super::npy_io;

/// A functional step whose result is not finite (a learning rate or tensor values so large
/// that f32 overflows) is an error naming the tensor, the array, the element and the
/// value, not a report of NaN weights.
pub fn check_finite(
    got: &[nmcp_emulator::lamb::TensorState],
    named: Option<&[npy_io::NamedTensor]>,
) -> Result<(), String> {
    for (t, s) in got.iter().enumerate() {
        for (kind, data) in [("w", &s.w), ("m", &s.m), ("v", &s.v)] {
            if let Some((i, x)) = data.iter().enumerate().find(|(_, x)| !x.is_finite()) {
                let name = named
                    .and_then(|n| n.get(t))
                    .map_or_else(|| format!("tensor {t}"), |n| format!("tensor `{}`", n.name));
                return Err(format!(
                    "the step's result is not finite: {name}, {kind}[{i}] = {x} (f32 overflowed: lower --lr or check the inputs' magnitudes)"
                ));
            }
        }
    }
    Ok(())
}
