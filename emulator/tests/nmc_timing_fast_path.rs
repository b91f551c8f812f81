//! The NMC engine's unchecked fast path (`PseudoChannel::issue_at_earliest`) against the
//! checked one (`earliest` + `issue`) on random legal command sequences that mix
//! single-bank and all-bank commands: every command must land on the same cycle, and
//! after every step each probe command that is legal in the banks' state must be issued
//! by the fast path at the cycle the checked path reports. Runs in release builds too,
//! where the fast path's own debug assertions are off.
//!
//! The fast path reads running maxima and a shared all-bank PRE gate instead of walking
//! the banks; mixing in single-bank commands, partial PREAs and refreshes is what could
//! make those disagree with the per-bank gates.

use nmcp_emulator::hbm::{BankId, Command, Cycle, HbmPreset, PseudoChannel};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const SEQUENCES: u64 = 40;
const COMMANDS_PER_SEQUENCE: usize = 400;
const ROWS_USED: u32 = 4;

/// A random command that is legal in the banks' current state (timing aside).
fn legal_command(pc: &PseudoChannel, rng: &mut Xoshiro256PlusPlus) -> Command {
    let banks = pc.banks();
    let all_open = (0..banks).all(|b| pc.open_row(b).is_some());
    let all_closed = (0..banks).all(|b| pc.open_row(b).is_none());
    let row = rng.random_range(0..ROWS_USED);
    let col = rng.random_range(0..32);
    // All-bank commands often, so long all-bank runs with interleaved single-bank ones occur.
    match rng.random_range(0..10) {
        0..=3 if all_open => {
            return if rng.random_bool(0.6) {
                Command::AbRd { col }
            } else {
                Command::AbWr { col }
            }
        }
        4 if all_closed => return Command::AbAct { row },
        5 if all_closed && rng.random_bool(0.2) => return Command::Ref,
        6 if rng.random_bool(0.3) => return Command::PreAll,
        _ => {}
    }
    let i = rng.random_range(0..banks);
    let bank = pc.bank_id(i);
    match pc.open_row(i) {
        None if rng.random_bool(0.1) => Command::RefPb { bank },
        None => Command::Act { bank, row },
        Some(open) => match rng.random_range(0..8) {
            0 => Command::Pre { bank },
            1..=3 => Command::Rd {
                bank,
                row: open,
                col,
            },
            4..=6 => Command::Wr {
                bank,
                row: open,
                col,
            },
            _ => Command::Update {
                bank,
                row: open,
                col,
            },
        },
    }
}

/// Commands of every kind, tried after every step where the banks' state allows them.
fn probes(pc: &PseudoChannel) -> Vec<Command> {
    let mut v = vec![
        Command::PreAll,
        Command::Ref,
        Command::AbAct { row: 0 },
        Command::AbRd { col: 0 },
        Command::AbWr { col: 0 },
    ];
    for i in 0..pc.banks() {
        let bank: BankId = pc.bank_id(i);
        v.extend([
            Command::Act { bank, row: 0 },
            Command::Pre { bank },
            Command::Rd {
                bank,
                row: 0,
                col: 0,
            },
            Command::Wr {
                bank,
                row: 0,
                col: 0,
            },
            Command::Update {
                bank,
                row: 0,
                col: 0,
            },
            Command::RefPb { bank },
        ]);
    }
    v
}

#[test]
fn fast_path_issues_on_the_checked_paths_cycle() {
    let preset = HbmPreset::builtin("hbm2-2000").expect("built-in preset");
    for seed in 0..SEQUENCES {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut checked = PseudoChannel::new(&preset);
        let mut fast = PseudoChannel::new(&preset);
        let mut now: Cycle = 0;
        for n in 0..COMMANDS_PER_SEQUENCE {
            let cmd = legal_command(&checked, &mut rng);
            // Sometimes the issuer is late (the engine's mode switches, host gaps).
            let not_before = now + if rng.random_bool(0.1) { 50 } else { 0 };
            let at = checked.earliest(&cmd).max(not_before);
            checked
                .issue(&cmd, at)
                .unwrap_or_else(|e| panic!("seed {seed} command {n}: {e}"));
            let fast_at = fast.issue_at_earliest(&cmd, not_before);
            assert_eq!(fast_at, at, "seed {seed} command {n}: {cmd}");
            for p in probes(&checked) {
                if checked.check_state(&p).is_err() {
                    continue;
                }
                let mut trial = fast.clone();
                assert_eq!(
                    trial.issue_at_earliest(&p, 0),
                    checked.earliest(&p),
                    "seed {seed} after command {n} ({cmd}): probe {p}"
                );
            }
            now = at;
        }
        assert_eq!(fast.command_counts(), checked.command_counts());
    }
}
