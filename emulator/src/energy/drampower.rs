//! The issued command stream in DRAMPower's command-trace format, for cross-checking the
//! DRAM energy: DRAMPower 5's CLI (`drampower_cli -m MEMSPEC.json -c CONFIG.json -t
//! TRACE.csv`) reads one command per line, `timestamp,command,rank,bank_group,bank,row,
//! column[,data]`, data in hex for RD/WR. Here a pseudo-channel is a rank (its own banks and
//! its own background state, as DRAMPower keeps per rank), the bank is its index in the
//! pseudo-channel, and the data of a burst is zeros (nmcp's `mem` runs carry no data; only
//! DRAMPower's interface toggling energy depends on it, not the core energy compared).
//! Commands DRAMPower has no equivalent of (the NMC all-bank and subarray commands,
//! op-and-store) are refused with their name: `nmcp mem` issues none of them.

use std::fmt::Write as _;

use crate::hbm::Command;
use crate::memctrl::LoggedCommand;

/// A command with no DRAMPower equivalent, and where it was issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The pseudo-channel.
    pub pseudo_channel: usize,
    /// The cycle.
    pub at: u64,
    /// The command, as nmcp prints it.
    pub command: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pseudo-channel {} cycle {}: {} has no DRAMPower equivalent",
            self.pseudo_channel, self.at, self.command
        )
    }
}

/// Geometry the trace needs.
#[derive(Debug, Clone, Copy)]
pub struct TraceShape {
    /// Banks per bank group.
    pub banks_per_group: u32,
    /// Bytes per column access (the data field's length).
    pub bytes_per_column: u32,
}

/// One line for `cmd` of pseudo-channel `pc`, or why there is none.
pub fn line(
    pc: usize,
    c: &LoggedCommand,
    shape: TraceShape,
    out: &mut String,
) -> Result<(), Unsupported> {
    let bank = |b: crate::hbm::BankId| {
        (
            u32::from(b.group),
            u32::from(b.group) * shape.banks_per_group + u32::from(b.bank),
        )
    };
    let (name, bg, ba, row, col, data) = match c.cmd {
        Command::Act { bank: b, row } => ("ACT", bank(b).0, bank(b).1, row, 0, false),
        Command::Pre { bank: b } => ("PRE", bank(b).0, bank(b).1, 0, 0, false),
        Command::PreAll => ("PREA", 0, 0, 0, 0, false),
        Command::Rd { bank: b, row, col } => ("RD", bank(b).0, bank(b).1, row, col, true),
        Command::Wr { bank: b, row, col } => ("WR", bank(b).0, bank(b).1, row, col, true),
        Command::Ref => ("REFA", 0, 0, 0, 0, false),
        Command::RefPb { bank: b } => ("REFB", bank(b).0, bank(b).1, 0, 0, false),
        other => {
            return Err(Unsupported {
                pseudo_channel: pc,
                at: c.at,
                command: other.to_string(),
            })
        }
    };
    let _ = write!(out, "{},{name},{pc},{bg},{ba},{row},{col}", c.at);
    if data {
        out.push_str(",0x");
        for _ in 0..shape.bytes_per_column {
            out.push_str("00");
        }
    }
    out.push('\n');
    Ok(())
}

/// Every pseudo-channel's log (`logs[pc]`) merged in issue order (ties by
/// pseudo-channel), then `END_OF_SIMULATION` at `end`, as the trace's text; or the first
/// command DRAMPower cannot take (the caller then writes nothing).
pub fn trace_text(
    logs: &[&[LoggedCommand]],
    shape: TraceShape,
    end: u64,
) -> Result<String, Unsupported> {
    let mut order: Vec<(u64, usize, usize)> = logs
        .iter()
        .enumerate()
        .flat_map(|(pc, log)| log.iter().enumerate().map(move |(i, c)| (c.at, pc, i)))
        .collect();
    order.sort_unstable();
    let mut text = String::new();
    for &(_, pc, i) in &order {
        if let Some(c) = logs.get(pc).and_then(|l| l.get(i)) {
            line(pc, c, shape, &mut text)?;
        }
    }
    let _ = writeln!(text, "{end},END_OF_SIMULATION,0,0,0,0,0");
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hbm::BankId;

    #[test]
    fn lines_follow_drampower_5s_csv_and_refuse_nmc_commands() {
        let shape = TraceShape {
            banks_per_group: 4,
            bytes_per_column: 2,
        };
        let b = BankId::new(1, 2);
        let pc0 = [
            LoggedCommand {
                at: 0,
                cmd: Command::Act { bank: b, row: 5 },
            },
            LoggedCommand {
                at: 14,
                cmd: Command::Rd {
                    bank: b,
                    row: 5,
                    col: 3,
                },
            },
        ];
        let pc1 = [LoggedCommand {
            at: 14,
            cmd: Command::Ref,
        }];
        let text = trace_text(&[&pc0, &pc1], shape, 100).unwrap();
        assert_eq!(
            text,
            "0,ACT,0,1,6,5,0\n14,RD,0,1,6,5,3,0x0000\n14,REFA,1,0,0,0,0\n100,END_OF_SIMULATION,0,0,0,0,0\n"
        );
        let nmc = [LoggedCommand {
            at: 7,
            cmd: Command::AbRd { col: 0 },
        }];
        let e = trace_text(&[&nmc], shape, 10).unwrap_err();
        assert_eq!((e.pseudo_channel, e.at), (0, 7));
    }
}
