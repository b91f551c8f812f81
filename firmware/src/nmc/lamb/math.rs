//! LAMB's scalar maths on the firmware core: the clip divisor, the stage-1 scalars and the
//! trust ratio.

use super::*;

/// The clip divisor for a global gradient norm.
pub fn clip_divisor(p: &LambParams, global_norm: f32) -> f32 {
    if p.max_grad_norm > 0.0 && global_norm > p.max_grad_norm {
        global_norm / p.max_grad_norm
    } else {
        1.0
    }
}

/// Scalar registers s0..s6 of a step (see the module documentation).
pub fn stage1_scalars(p: &LambParams) -> [f32; 7] {
    let (bc1, bc2) = if p.bias_correction {
        let t = p.step.max(1) as f32;
        (
            1.0 / (1.0 - libm::powf(p.beta1, t)),
            1.0 / (1.0 - libm::powf(p.beta2, t)),
        )
    } else {
        (1.0, 1.0)
    };
    let sq_bc2 = libm::sqrtf(bc2);
    [
        p.weight_decay,
        p.beta1,
        1.0 - p.beta1,
        p.beta2,
        1.0 - p.beta2,
        bc1 / sq_bc2,
        p.eps / sq_bc2,
    ]
}

/// The trust ratio from the squared norms.
pub fn trust_ratio(p: &LambParams, weight_sq: f32, update_sq: f32) -> f32 {
    let (w, u) = (libm::sqrtf(weight_sq), libm::sqrtf(update_sq));
    let r = if w > 0.0 && u > 0.0 { w / u } else { 1.0 };
    if p.trust_clamp > 0.0 {
        r.min(p.trust_clamp)
    } else {
        r
    }
}
