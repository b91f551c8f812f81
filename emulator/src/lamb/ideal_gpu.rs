//! The ideal-GPU baseline of dissertation 6.4: LAMB moves exactly its 13 array passes of
//! FP32 data over the GPU-HBM interface at a fixed fraction of peak bandwidth, with no
//! temporaries, kernel launches or synchronisation.

/// The array passes of one LAMB step (SPEC 4.1), each one read or write of one FP32
/// array of every tensor.
pub const ARRAY_PASSES: [&str; 13] = [
    "read g (global norm)",
    "read g (stage 1)",
    "read w (stage 1)",
    "read m (stage 1)",
    "read v (stage 1)",
    "write u (stage 1)",
    "write m (stage 1)",
    "write v (stage 1)",
    "read w (weight norm)",
    "read u (update norm)",
    "read u (stage 2)",
    "read w (stage 2)",
    "write w (stage 2)",
];

/// An ideal GPU with a given peak bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IdealGpu {
    /// Peak HBM bandwidth in bytes per second.
    pub peak_bytes_per_s: f64,
}

impl IdealGpu {
    /// Bytes one LAMB step moves for `params` FP32 parameters.
    pub fn bytes(params: u64) -> u64 {
        ARRAY_PASSES.len() as u64 * params * 4
    }

    /// Seconds one LAMB step takes at `fraction` of peak (1.0, 0.9, 0.8).
    pub fn seconds(&self, params: u64, fraction: f64) -> f64 {
        Self::bytes(params) as f64 / (self.peak_bytes_per_s * fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bert_large_moves_about_17_7_gb() {
        let b = IdealGpu::bytes(340_000_000);
        assert_eq!(b, 13 * 340_000_000 * 4);
        let gpu = IdealGpu {
            peak_bytes_per_s: 1.0e12,
        };
        let t = gpu.seconds(340_000_000, 0.8);
        assert!((t - 17.68e9 / 0.8e12).abs() < 1e-9);
    }
}
