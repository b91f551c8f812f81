//! The DRAM command set, including the NMC commands, and the coordinates commands target.

use std::fmt;

/// A bank within one pseudo-channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BankId {
    /// Bank group.
    pub group: u8,
    /// Bank within the group.
    pub bank: u8,
}

impl BankId {
    /// A bank by group and index within the group.
    pub const fn new(group: u8, bank: u8) -> Self {
        BankId { group, bank }
    }
}

impl fmt::Display for BankId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bg{}.ba{}", self.group, self.bank)
    }
}

/// One command on a pseudo-channel's command buses.
///
/// Row commands (ACT, PRE, PREA, REF, REFpb, AB-ACT) use the row command bus, column
/// commands (RD, WR, AB-RD, AB-WR, UPD) the column command bus; HBM has both, so one of
/// each may issue in the same cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// Activate (open) a row in one bank.
    Act {
        /// Target bank.
        bank: BankId,
        /// Row to open.
        row: u32,
    },
    /// Precharge (close) one bank.
    Pre {
        /// Target bank.
        bank: BankId,
    },
    /// Precharge every bank of the pseudo-channel.
    PreAll,
    /// Read one column access from an open row.
    Rd {
        /// Target bank.
        bank: BankId,
        /// The row the controller believes is open (checked).
        row: u32,
        /// Column access.
        col: u32,
    },
    /// Write one column access to an open row.
    Wr {
        /// Target bank.
        bank: BankId,
        /// The row the controller believes is open (checked).
        row: u32,
        /// Column access.
        col: u32,
    },
    /// All-bank refresh; every bank must be precharged.
    Ref,
    /// Per-bank refresh; the bank must be precharged.
    RefPb {
        /// Target bank.
        bank: BankId,
    },
    /// NMC: activate the same row in every bank.
    AbAct {
        /// Row to open in every bank.
        row: u32,
    },
    /// NMC: read the same column of every bank into its ALU.
    AbRd {
        /// Column access.
        col: u32,
    },
    /// NMC: write the same column of every bank from its ALU.
    AbWr {
        /// Column access.
        col: u32,
    },
    /// NMC op-and-store (T3): read-modify-write of one column in one bank with data
    /// arriving on the bus.
    Update {
        /// Target bank.
        bank: BankId,
        /// The row the controller believes is open (checked).
        row: u32,
        /// Column access.
        col: u32,
    },
    /// MASA (subarray-level parallelism): activate `row` in every bank, in the row's
    /// subarray, leaving rows open in the bank's other subarrays; that subarray becomes
    /// the designated one (column commands go to it). Needs the subarray precharged.
    AbSaAct {
        /// Row to open in every bank.
        row: u32,
    },
    /// MASA: designate the subarray holding `row` (open at `row` in every bank) for the
    /// following column commands (SA_SEL).
    AbSaSel {
        /// The open row whose subarray is selected.
        row: u32,
    },
    /// MASA: precharge the subarray holding `row` in every bank (it must be open); the
    /// bank's other subarrays stay open.
    AbSaPre {
        /// A row of the subarray to close.
        row: u32,
    },
    /// MASA with refresh-access parallelism (SARP, Chang et al. HPCA 2014): refresh the
    /// subarray holding `row` in every bank (precharged there) for tRFC, while the banks'
    /// other subarrays stay open and may be accessed. Needs a preset with
    /// `[subarrays] refresh_parallel = true`.
    AbSaRef {
        /// A row of the subarray to refresh.
        row: u32,
    },
}

/// The kind of a [`Command`], for counting and logging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum CommandKind {
    /// ACT.
    Act,
    /// PRE.
    Pre,
    /// PREA.
    PreAll,
    /// RD.
    Rd,
    /// WR.
    Wr,
    /// REF.
    Ref,
    /// REFpb.
    RefPb,
    /// AB-ACT.
    AbAct,
    /// AB-RD.
    AbRd,
    /// AB-WR.
    AbWr,
    /// UPD.
    Update,
    /// AB-SA-ACT (MASA).
    AbSaAct,
    /// AB-SA-SEL (MASA).
    AbSaSel,
    /// AB-SA-PRE (MASA).
    AbSaPre,
    /// AB-SA-REF (MASA with refresh-access parallelism).
    AbSaRef,
}

/// Number of [`CommandKind`]s.
pub const COMMAND_KINDS: usize = 15;

/// Every [`CommandKind`], in `repr` order.
pub const ALL_COMMAND_KINDS: [CommandKind; COMMAND_KINDS] = [
    CommandKind::Act,
    CommandKind::Pre,
    CommandKind::PreAll,
    CommandKind::Rd,
    CommandKind::Wr,
    CommandKind::Ref,
    CommandKind::RefPb,
    CommandKind::AbAct,
    CommandKind::AbRd,
    CommandKind::AbWr,
    CommandKind::Update,
    CommandKind::AbSaAct,
    CommandKind::AbSaSel,
    CommandKind::AbSaPre,
    CommandKind::AbSaRef,
];

impl CommandKind {
    /// Mnemonic used in logs and statistics.
    pub fn mnemonic(self) -> &'static str {
        match self {
            CommandKind::Act => "ACT",
            CommandKind::Pre => "PRE",
            CommandKind::PreAll => "PREA",
            CommandKind::Rd => "RD",
            CommandKind::Wr => "WR",
            CommandKind::Ref => "REF",
            CommandKind::RefPb => "REFpb",
            CommandKind::AbAct => "AB-ACT",
            CommandKind::AbRd => "AB-RD",
            CommandKind::AbWr => "AB-WR",
            CommandKind::Update => "UPD",
            CommandKind::AbSaAct => "AB-SA-ACT",
            CommandKind::AbSaSel => "AB-SA-SEL",
            CommandKind::AbSaPre => "AB-SA-PRE",
            CommandKind::AbSaRef => "AB-SA-REF",
        }
    }

    /// Whether the command travels on the row command bus (otherwise the column bus).
    pub fn is_row_command(self) -> bool {
        matches!(
            self,
            CommandKind::Act
                | CommandKind::Pre
                | CommandKind::PreAll
                | CommandKind::Ref
                | CommandKind::RefPb
                | CommandKind::AbAct
                | CommandKind::AbSaAct
                | CommandKind::AbSaSel
                | CommandKind::AbSaPre
                | CommandKind::AbSaRef
        )
    }
}

impl fmt::Display for CommandKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())
    }
}

impl Command {
    /// The command's kind.
    pub fn kind(&self) -> CommandKind {
        match self {
            Command::Act { .. } => CommandKind::Act,
            Command::Pre { .. } => CommandKind::Pre,
            Command::PreAll => CommandKind::PreAll,
            Command::Rd { .. } => CommandKind::Rd,
            Command::Wr { .. } => CommandKind::Wr,
            Command::Ref => CommandKind::Ref,
            Command::RefPb { .. } => CommandKind::RefPb,
            Command::AbAct { .. } => CommandKind::AbAct,
            Command::AbRd { .. } => CommandKind::AbRd,
            Command::AbWr { .. } => CommandKind::AbWr,
            Command::Update { .. } => CommandKind::Update,
            Command::AbSaAct { .. } => CommandKind::AbSaAct,
            Command::AbSaSel { .. } => CommandKind::AbSaSel,
            Command::AbSaPre { .. } => CommandKind::AbSaPre,
            Command::AbSaRef { .. } => CommandKind::AbSaRef,
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Act { bank, row } => write!(f, "ACT {bank} row {row}"),
            Command::Pre { bank } => write!(f, "PRE {bank}"),
            Command::PreAll => write!(f, "PREA"),
            Command::Rd { bank, row, col } => write!(f, "RD {bank} row {row} col {col}"),
            Command::Wr { bank, row, col } => write!(f, "WR {bank} row {row} col {col}"),
            Command::Ref => write!(f, "REF"),
            Command::RefPb { bank } => write!(f, "REFpb {bank}"),
            Command::AbAct { row } => write!(f, "AB-ACT row {row}"),
            Command::AbRd { col } => write!(f, "AB-RD col {col}"),
            Command::AbWr { col } => write!(f, "AB-WR col {col}"),
            Command::Update { bank, row, col } => write!(f, "UPD {bank} row {row} col {col}"),
            Command::AbSaAct { row } => write!(f, "AB-SA-ACT row {row}"),
            Command::AbSaSel { row } => write!(f, "AB-SA-SEL row {row}"),
            Command::AbSaPre { row } => write!(f, "AB-SA-PRE row {row}"),
            Command::AbSaRef { row } => write!(f, "AB-SA-REF row {row}"),
        }
    }
}
