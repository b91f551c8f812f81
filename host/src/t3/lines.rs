//! The reports of `nmcp t3 check`, `t3 rs` and `t3 cu-split`: one JSON object (or array)
//! or the text lines, with the dissertation's figures where it has them.

use std::path::Path;

use nmcp_emulator::t3::run::CuSplit;
use nmcp_emulator::t3::{CheckOutput, CheckRun, RsTiming, Simulate, SubLayer};

type Text = Result<String, serde_json::Error>;

/// `t3 check`'s report of `out` (`dtype` the element type's name; `out_dir` where the
/// `.npy` files went, if anywhere).
pub fn check(
    json: bool,
    run: &CheckRun,
    dtype: &str,
    out_dir: Option<&Path>,
    out: &CheckOutput,
) -> Text {
    let verdict = if out.mismatches == 0 { "ok" } else { "FAILED" };
    if json {
        let v = serde_json::json!({
            "gpus": run.gpus, "m": run.m, "n": run.n, "k": run.k,
            "dtype": dtype, "config": run.scenario.name(),
            "mismatches": out.mismatches, "first_mismatch": out.first_mismatch,
            "seconds": out.seconds,
            "out": out_dir.map(|d| d.display().to_string()),
        });
        Ok(serde_json::to_string_pretty(&v)? + "\n")
    } else {
        let wrote = out_dir.map_or(String::new(), |d| format!("; wrote {}", d.display()));
        Ok(format!(
            "t3 check {verdict}: {} on {} GPUs, {} x {} x {} {}: {} mismatches, {:.3} µs simulated{wrote}\n",
            run.scenario.name(),
            run.gpus,
            run.m,
            run.n,
            run.k,
            dtype,
            out.mismatches,
            out.seconds * 1e6
        ))
    }
}

/// `t3 rs`'s report of a ring reduce-scatter of `bytes` over `gpus` GPUs.
pub fn rs(json: bool, gpus: u32, bytes: u64, simulate: Simulate, t: &RsTiming) -> Text {
    if json {
        let v = serde_json::json!({
            "gpus": gpus,
            "bytes": bytes,
            "simulate": super::simulate_name(simulate),
            "rs_seconds": t.rs_seconds,
            "model_seconds": t.model_seconds,
            "steps": t.steps,
        });
        Ok(serde_json::to_string_pretty(&v)? + "\n")
    } else {
        let ratio = if t.model_seconds > 0.0 {
            format!("{:.3}x the model", t.rs_seconds / t.model_seconds)
        } else {
            "-".into()
        };
        Ok(format!(
            "ring reduce-scatter of {} bytes over {} GPUs ({} steps): {:.2} µs simulated, {:.2} µs bandwidth-latency model ({ratio})\n",
            bytes,
            gpus,
            t.steps,
            t.rs_seconds * 1e6,
            t.model_seconds * 1e6
        ))
    }
}

/// `t3 cu-split`'s report: each split next to the GEMM and the reduce-scatter alone.
pub fn cu_split(json: bool, model: &str, sl: &SubLayer, tp: u32, rows: &[CuSplit]) -> Text {
    if json {
        return Ok(serde_json::to_string_pretty(&rows)? + "\n");
    }
    let mut out = format!(
        "{} {} TP {}: GEMM alone {:.1} µs, reduce-scatter alone {:.1} µs, ideal overlap {:.2}x\n",
        model,
        sl.name,
        tp,
        rows.first().map_or(0.0, |r| r.gemm_alone_seconds * 1e6),
        rows.first().map_or(0.0, |r| r.rs_alone_seconds * 1e6),
        rows.first().map_or(0.0, |r| r.ideal_speedup),
    );
    for r in rows {
        out += &format!(
            "  {}-{}: GEMM {:.1} µs ({:+.0} %), RS {:.1} µs ({:+.0} %), overlapped {:.2}x  (dissertation, Mega-GPT-2/T-NLG TP 8: 72-8 RS +41 % -> 1.2x; 64-16 RS +7 %, GEMM +21 % -> 1.5x; ideal 1.7x)\n",
            r.gemm_cus,
            r.rs_cus,
            r.gemm_seconds * 1e6,
            100.0 * (r.gemm_seconds / r.gemm_alone_seconds - 1.0),
            r.rs_seconds * 1e6,
            100.0 * (r.rs_seconds / r.rs_alone_seconds - 1.0),
            r.speedup
        );
    }
    Ok(out)
}
