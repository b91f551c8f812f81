//! The DRAM energy of a small hand-written command sequence against a hand computation
//! from `hbm2-2000`'s `[energy]` values, and the `[energy]` section's validation.
//!
//! hbm2-2000: VDD 1.2 V, currents per 128-bit channel, a 64-bit pseudo-channel draws half:
//! an effective 0.6 V x mA. tCK 1 ns, tRAS 34, tRP 14, BL 2 tCK, tRFC 350, 16 banks,
//! 32 B per column. Per command (mA x V x ns = pJ):
//!   ACT   0.6 x (65 - 55) x 34   =   204 pJ
//!   PRE   0.6 x (65 - 40) x 14   =   210 pJ
//!   RD    0.6 x (390 - 55) x 2   =   402 pJ
//!   WR    0.6 x (500 - 55) x 2   =   534 pJ
//!   REF   0.6 x (250 - 55) x 350 = 40950 pJ;  REFpb = 40950 / 16 = 2559.375 pJ
//!   active standby 0.6 x 55 = 33 pJ per cycle, precharged standby 0.6 x 40 = 24 pJ
//!   I/O + TSV (1.79 + 0.23) pJ x 256 bits = 517.12 pJ per column on the bus

use nmcp_emulator::energy::{CommandEnergy, DramActivity, DramEnergy};
use nmcp_emulator::hbm::{BankId, Command, HbmPreset, PseudoChannel};

const B0: BankId = BankId::new(0, 0);
const B1: BankId = BankId::new(1, 0);

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-30)
}

#[test]
fn a_hand_written_sequence_costs_what_the_hand_computation_says() {
    let p = HbmPreset::builtin("hbm2-2000").unwrap();
    let mut pc = PseudoChannel::new(&p);
    // Two banks open at 0 and 4, two reads, a write, both closed by one PREA, a REF,
    // a per-bank refresh; observed until cycle 1000.
    let seq = [
        (0, Command::Act { bank: B0, row: 7 }),
        (4, Command::Act { bank: B1, row: 9 }),
        (
            14,
            Command::Rd {
                bank: B0,
                row: 7,
                col: 0,
            },
        ),
        (
            18,
            Command::Rd {
                bank: B1,
                row: 9,
                col: 1,
            },
        ),
        (
            40,
            Command::Wr {
                bank: B0,
                row: 7,
                col: 2,
            },
        ),
        (100, Command::PreAll),
        (114, Command::Ref),
        (500, Command::RefPb { bank: B1 }),
    ];
    for (at, c) in seq {
        pc.issue(&c, at)
            .unwrap_or_else(|e| panic!("{c} at {at}: {e}"));
    }
    let a = DramActivity::from_pseudo_channels([&pc], 1000);
    assert_eq!(
        a.active_cycles, 100,
        "a bank open from 0 to the PREA at 100"
    );
    assert_eq!(a.bank_precharges, 2, "the PREA closed two banks");
    let e = DramEnergy::of(&a, &CommandEnergy::of(&p));
    let pj = 1e-12;
    assert!(close(e.activate_j, 2.0 * 204.0 * pj), "{}", e.activate_j);
    assert!(close(e.precharge_j, 2.0 * 210.0 * pj), "{}", e.precharge_j);
    assert!(close(e.read_j, 2.0 * 402.0 * pj), "{}", e.read_j);
    assert!(close(e.write_j, 534.0 * pj), "{}", e.write_j);
    assert!(
        close(e.refresh_j, (40950.0 + 2559.375) * pj),
        "{}",
        e.refresh_j
    );
    assert!(close(e.background_active_j, 100.0 * 33.0 * pj));
    assert!(close(e.background_idle_j, 900.0 * 24.0 * pj));
    assert_eq!(e.interface_bits, 3 * 256);
    assert!(close(e.interface_j, 3.0 * 517.12 * pj), "{}", e.interface_j);
    assert_eq!(e.nmc_alu_j, 0.0);
    let core = (408.0 + 420.0 + 804.0 + 534.0 + 43509.375 + 3300.0 + 21600.0) * pj;
    assert!(close(e.core_j(), core), "{} vs {core}", e.core_j());
    assert!(close(e.total_j(), core + 1551.36 * pj));
}

#[test]
fn all_bank_and_update_commands_cost_per_bank_and_per_lane() {
    // On lamb-ch6 (hbm2-2000 timing and energy): an AB-ACT opens 16 rows, an AB-RD reads a
    // column in each of the 16 banks (no bus transfer), a UPD is a read and a write burst
    // in the core, 256 bits in over the interface and 8 lane additions at 0.5 pJ.
    let p = HbmPreset::builtin("lamb-ch6").unwrap();
    let mut pc = PseudoChannel::new(&p);
    pc.issue(&Command::AbAct { row: 3 }, 0).unwrap();
    let rd_at = pc.earliest(&Command::AbRd { col: 0 });
    pc.issue(&Command::AbRd { col: 0 }, rd_at).unwrap();
    let mut a = DramActivity::from_pseudo_channels([&pc], 100);
    a.nmc_lane_ops = 16 * 8;
    let e = DramEnergy::of(&a, &CommandEnergy::of(&p));
    let pj = 1e-12;
    assert!(close(e.activate_j, 16.0 * 204.0 * pj));
    assert!(close(e.read_j, 16.0 * 402.0 * pj));
    assert_eq!(
        e.interface_bits, 0,
        "AB-RD moves nothing over the interface"
    );
    assert!(close(e.nmc_alu_j, 128.0 * 0.5 * pj));

    let mut pc = PseudoChannel::new(&p);
    pc.issue(&Command::Act { bank: B0, row: 1 }, 0).unwrap();
    let upd = Command::Update {
        bank: B0,
        row: 1,
        col: 0,
    };
    let at = pc.earliest(&upd);
    pc.issue(&upd, at).unwrap();
    let e = DramEnergy::of(
        &DramActivity::from_pseudo_channels([&pc], 100),
        &CommandEnergy::of(&p),
    );
    assert!(close(e.read_j + e.write_j, (402.0 + 534.0) * pj));
    assert_eq!(e.interface_bits, 256);
    assert!(close(e.nmc_alu_j, 8.0 * 0.5 * pj));
}

#[test]
fn the_energy_section_is_validated_with_the_field_named() {
    let text = nmcp_emulator::hbm::config::builtin_toml("hbm2-2000").unwrap();
    for (from, to, field) in [
        ("idd3n_ma = 55.0", "idd3n_ma = 30.0", "energy.idd3n_ma"),
        ("vdd_v = 1.2", "vdd_v = nan", "energy.vdd_v"),
        (
            "io_pj_per_bit = 1.79",
            "io_pj_per_bit = -1.0",
            "energy.io_pj_per_bit",
        ),
        (
            "idd_width_bits = 128",
            "idd_width_bits = 0",
            "energy.idd_width_bits",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let err = HbmPreset::from_toml(&text.replace(from, to)).unwrap_err();
        assert!(err.to_string().contains(field), "{to}: {err}");
    }
    let unknown = text.replace("vdd_v = 1.2", "vdd_v = 1.2\nvddq = 1.2");
    assert!(HbmPreset::from_toml(&unknown).is_err());
}
