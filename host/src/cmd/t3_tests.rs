//! Unit tests of `nmcp t3`'s options: the study's sub-layer selection, bad values as
//! usage errors naming the option, byte counts and machine options.

use super::*;
use crate::t3::select::parse_bytes;
use clap::Parser;
use nmcp_emulator::t3::T3Options;
use nmcp_isa::gemm_ext::GemmDataType;

#[derive(clap::Parser, Debug)]
struct Top {
    #[command(flatten)]
    t3: T3Args,
}

fn study(args: &[&str]) -> StudyOptions {
    let mut v = vec!["t3"];
    v.extend(args);
    Top::try_parse_from(v).unwrap().t3.study
}

#[test]
fn default_study_is_two_models_at_their_tps() {
    let s = study_sublayers(&study(&[])).unwrap();
    assert_eq!(s.len(), 2 * 2 * 4);
    assert_eq!(report::label(&s[0]), "mega-gpt-2 OP TP8");
    assert_eq!(report::label(&s[4]), "mega-gpt-2 OP TP16");
    assert_eq!(report::label(&s[15]), "t-nlg IP TP16");
    let all = study_sublayers(&study(&["--models", "all"])).unwrap();
    assert_eq!(all.len(), 4 * (2 + 2 + 1 + 1 + 1));
    assert!(all.iter().filter(|s| s.model == "palm").all(|s| s.tp == 32));
}

#[test]
fn custom_model_and_filters() {
    let a = study(&[
        "--h",
        "1024",
        "--tokens",
        "2048",
        "--model-name",
        "mine",
        "--tp",
        "4",
        "--sublayers",
        "op,fc2",
    ]);
    let s = study_sublayers(&a).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].model.as_str(), s[0].name, s[0].tp, s[0].k),
        ("mine", "OP", 4, 256)
    );
    assert_eq!(s[1].name, "FC-2");
}

#[test]
fn bad_values_are_usage_errors_naming_the_option() {
    for (args, want) in [
        (
            vec!["t3", "--models", "nosuch"],
            "mega-gpt-2, t-nlg, gpt-3, palm, mt-nlg",
        ),
        (vec!["t3", "--tp", "0"], "--tp"),
        (vec!["t3", "--sublayers", "FC-3"], "unknown sub-layer"),
        (vec!["t3", "--gpus", "1"], "at least 2"),
        (vec!["t3", "--link-gbps", "0"], "--link-gbps"),
        (vec!["t3", "check", "--gpus", "1"], "at least 2"),
        (vec!["t3", "check", "--config", "ideal-overlap"], "t3-mca"),
        (vec!["t3", "rs", "--bytes", "0"], "--bytes"),
    ] {
        let e = Top::try_parse_from(&args).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{args:?}");
        let msg = e.to_string();
        assert!(msg.contains(want), "{args:?}: {msg}");
    }
    // A relation between options is the library's check, after the merge.
    let Err(crate::scenario::Failure::Message(msg)) =
        crate::resolve(["nmcp", "t3", "--h", "100"].map(Into::into).to_vec())
    else {
        panic!("--h without --tokens accepted");
    };
    assert!(msg.contains("--tokens"), "{msg}");
}

#[test]
fn byte_counts_and_machine_options() {
    assert_eq!(parse_bytes("64M"), Ok(64 << 20));
    assert_eq!(parse_bytes("1_000"), Ok(1000));
    assert_eq!(parse_bytes("2k"), Ok(2048));
    assert!(parse_bytes("x").is_err());
    let a = study(&["--gpu-2x-cu", "--link-gbps", "100", "--mca-threshold", "6"]);
    let o = a.machine.options(0, Simulate::AllGpus, Dtype::F32);
    let base = T3Options::default();
    assert_eq!(o.gpu.cus, 2 * base.gpu.cus);
    assert_eq!(o.gpu.name, format!("{}-2x-cu", base.gpu.name));
    assert_eq!(o.link.bytes_per_ns, 100.0);
    assert_eq!(o.link.latency_ns, base.link.latency_ns);
    assert_eq!(o.mca_threshold, Some(6));
    assert_eq!(o.dtype, GemmDataType::F32);
    // --threads: as given, or (0, the default) the free cores, at least one per job.
    assert_eq!(study(&["--threads", "3"]).machine.threads_for(2), 3);
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as u32;
    let auto = study(&[]).machine.threads_for(1);
    assert!((1..=cores).contains(&auto), "{auto} of {cores}");
    assert_eq!(study(&[]).machine.threads_for(cores + 1), 1);
}
