//! `nmcp aql decode`: raw AQL packets (a queue dump) to a table or JSON lines.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use nmcp_emulator::gpu::queue::{DumpPacket, QueueDump};
use nmcp_emulator::node::DEFAULT_DEVICE;
use nmcp_isa::aql::{self, AqlPacket, DeviceRange, KernelDispatchPacket};
use nmcp_isa::gemm_ext::{GemmExt, GEMM_EXT_BYTES};
use serde_json::{json, Value};

use super::io::{emit, outln, parse_range, read_dump};
use super::CmdResult;
use crate::cp_replay::dispatch_ids;

/// Arguments of `nmcp aql`.
#[derive(clap::Args, Debug)]
pub struct AqlArgs {
    #[command(subcommand)]
    command: AqlCommand,
}

#[derive(Subcommand, Debug)]
enum AqlCommand {
    /// Decode a queue dump: raw 64-byte packets, optionally with NMCP directive records
    /// carrying device memory (GEMM extension records) and queue numbers. Make one with
    /// `nmcp cp gen-dump`.
    Decode(DecodeArgs),
}

/// Arguments of `nmcp aql decode`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct DecodeArgs {
    /// The dump file.
    file: PathBuf,
    /// One JSON object per packet (hsa.h field names) instead of a table.
    #[arg(long)]
    json: bool,
    /// Device memory the addresses are checked against, `BASE:LEN` (hex or decimal);
    /// default: the dump's DEVICE directive, else 256 MiB at 0x10000000.
    #[arg(long, value_parser = parse_range)]
    #[serde(default, deserialize_with = "device_range::option")]
    device: Option<DeviceRange>,
}

crate::scenario::parsed!(mod device_range = parse_range => DeviceRange);

impl crate::scenario::Options for DecodeArgs {}

impl AqlArgs {
    /// The typed options of the command run.
    pub(crate) fn options(&mut self) -> &mut dyn crate::scenario::Typed {
        match &mut self.command {
            AqlCommand::Decode(a) => a,
        }
    }
}

/// Runs `nmcp aql`.
pub fn run(args: AqlArgs) -> CmdResult {
    match args.command {
        AqlCommand::Decode(d) => decode(&d.file, d.json, d.device),
    }
}

/// The GEMM extension a kernel-dispatch packet points at, if the dump carries it.
pub fn extension(dump: &QueueDump, p: &KernelDispatchPacket) -> Option<Result<GemmExt, String>> {
    if p.gemm_ext_address == 0 {
        return None;
    }
    Some(match dump.lookup(p.gemm_ext_address, GEMM_EXT_BYTES) {
        None => Err(format!(
            "no {GEMM_EXT_BYTES}-byte memory section at {:#x} in the dump",
            p.gemm_ext_address
        )),
        Some(b) => GemmExt::decode(b).map_err(|e| e.to_string()),
    })
}

/// JSON of a GEMM extension record.
pub fn ext_json(g: &GemmExt) -> Value {
    json!({
        "m": g.m, "n": g.n, "k": g.k, "batch": g.batch,
        "trans_a": g.trans_a, "trans_b": g.trans_b, "dtype": g.dtype.name(),
        "kernels": g.kernels.iter().map(|k| json!({
            "kernel_object": k.kernel_object,
            "macro_tile_0": k.macro_tile_0,
            "macro_tile_1": k.macro_tile_1,
            "depth_u": k.depth_u,
            "workgroup_size": k.workgroup_size,
            "lds_bytes": k.lds_bytes,
            "vgprs_per_thread": k.vgprs_per_thread,
            "split_k": k.split_k,
        })).collect::<Vec<_>>(),
        "cd_choice": g.cd_choice,
    })
}

fn packet_json(dump: &QueueDump, device: &DeviceRange, p: &DumpPacket, id: u64) -> Value {
    let mut obj = json!({ "offset": p.offset, "queue": p.queue, "dispatch_id": id });
    let map = obj
        .as_object_mut()
        .expect("json! of an object is an object");
    let packet = match aql::decode(&p.bytes) {
        Ok(pk) => pk,
        Err(e) => {
            map.insert("error".into(), json!(e.to_string()));
            return obj;
        }
    };
    let h = packet.header();
    map.insert("type".into(), json!(h.packet_type.name()));
    map.insert("barrier".into(), json!(h.barrier));
    map.insert(
        "acquire_fence_scope".into(),
        json!(h.acquire_fence_scope.name()),
    );
    map.insert(
        "release_fence_scope".into(),
        json!(h.release_fence_scope.name()),
    );
    match packet {
        AqlPacket::KernelDispatch(k) => {
            let [wx, wy, wz] = k.workgroup_size;
            let [gx, gy, gz] = k.grid_size;
            for (name, v) in [
                ("dimensions", u64::from(k.dimensions)),
                ("workgroup_size_x", u64::from(wx)),
                ("workgroup_size_y", u64::from(wy)),
                ("workgroup_size_z", u64::from(wz)),
                ("grid_size_x", u64::from(gx)),
                ("grid_size_y", u64::from(gy)),
                ("grid_size_z", u64::from(gz)),
                ("private_segment_size", u64::from(k.private_segment_size)),
                ("group_segment_size", u64::from(k.group_segment_size)),
                ("kernel_object", k.kernel_object),
                ("kernarg_address", k.kernarg_address),
                ("gemm_ext_address", k.gemm_ext_address),
                ("completion_signal", k.completion_signal),
            ] {
                map.insert(name.into(), json!(v));
            }
            if let Err(e) = k.validate(device, GEMM_EXT_BYTES as u64) {
                map.insert("invalid".into(), json!(e.to_string()));
            }
            match extension(dump, &k) {
                Some(Ok(g)) => {
                    map.insert("gemm_ext".into(), ext_json(&g));
                }
                Some(Err(e)) => {
                    map.insert("gemm_ext_error".into(), json!(e));
                }
                None => {}
            }
        }
        AqlPacket::BarrierAnd(b) | AqlPacket::BarrierOr(b) => {
            map.insert("dep_signal".into(), json!(b.dep_signal));
            map.insert("completion_signal".into(), json!(b.completion_signal));
            if let Err(e) = b.validate(device) {
                map.insert("invalid".into(), json!(e.to_string()));
            }
        }
        AqlPacket::Invalid(_) => {}
    }
    obj
}

fn ext_summary(g: &GemmExt) -> String {
    format!(
        "GEMM {}x{}x{}{} {}{}{} kernels={} cd_choice={:?}",
        g.m,
        g.n,
        g.k,
        if g.batch > 1 {
            format!(" batch {}", g.batch)
        } else {
            String::new()
        },
        g.dtype.name(),
        if g.trans_a { " tA" } else { "" },
        if g.trans_b { " tB" } else { "" },
        g.kernels.len(),
        g.cd_choice
    )
}

fn packet_row(dump: &QueueDump, device: &DeviceRange, p: &DumpPacket, id: u64) -> String {
    let mut row = format!("{:>8} {:>2} {:>4} ", p.offset, p.queue, id);
    let packet = match aql::decode(&p.bytes) {
        Ok(pk) => pk,
        Err(e) => {
            let _ = write!(row, "error: {e}");
            return row;
        }
    };
    let h = packet.header();
    let _ = write!(
        row,
        "{:<15} {} {:<6} {:<6} ",
        h.packet_type.name(),
        if h.barrier { 'B' } else { '-' },
        h.acquire_fence_scope.name(),
        h.release_fence_scope.name()
    );
    match packet {
        AqlPacket::KernelDispatch(k) => {
            let _ = write!(
                row,
                "d{} wg {}x{}x{} grid {}x{}x{} ko {:#x} signal {:#x}",
                k.dimensions,
                k.workgroup_size[0],
                k.workgroup_size[1],
                k.workgroup_size[2],
                k.grid_size[0],
                k.grid_size[1],
                k.grid_size[2],
                k.kernel_object,
                k.completion_signal
            );
            match extension(dump, &k) {
                Some(Ok(g)) => {
                    let _ = write!(row, " | {}", ext_summary(&g));
                }
                Some(Err(e)) => {
                    let _ = write!(row, " | extension error: {e}");
                }
                None => {}
            }
            if let Err(e) = k.validate(device, GEMM_EXT_BYTES as u64) {
                let _ = write!(row, " | invalid: {e}");
            }
        }
        AqlPacket::BarrierAnd(b) | AqlPacket::BarrierOr(b) => {
            let deps: Vec<String> = b
                .dep_signal
                .iter()
                .filter(|&&d| d != 0)
                .map(|d| format!("{d:#x}"))
                .collect();
            let _ = write!(
                row,
                "deps [{}] signal {:#x}",
                deps.join(", "),
                b.completion_signal
            );
        }
        AqlPacket::Invalid(_) => {}
    }
    row
}

fn decode(file: &Path, json: bool, device: Option<DeviceRange>) -> CmdResult {
    let dump = read_dump(file)?;
    let device = device.or(dump.device).unwrap_or(DEFAULT_DEVICE);
    let ids = dispatch_ids(&dump);
    let mut out = String::new();
    if !json {
        outln!(
            out,
            "{:>8} {:>2} {:>4} {:<15} B {:<6} {:<6} fields",
            "offset",
            "q",
            "id",
            "type",
            "acq",
            "rel"
        );
    }
    let mut failed = Vec::new();
    for (p, &id) in dump.packets.iter().zip(&ids) {
        if let Err(e) = aql::decode(&p.bytes) {
            failed.push((p.offset, e));
        }
        if json {
            outln!(out, "{}", packet_json(&dump, &device, p, id));
        } else {
            outln!(out, "{}", packet_row(&dump, &device, p, id));
        }
    }
    emit(&out)?;
    match failed.first() {
        None => Ok(()),
        Some((offset, e)) => Err(format!(
            "{}: {} of {} packets do not decode (first at offset {offset}: {e})",
            file.display(),
            failed.len(),
            dump.packets.len()
        )
        .into()),
    }
}
