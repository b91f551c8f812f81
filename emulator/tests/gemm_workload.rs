//! Workloads: Table 7.3 expansion, the dataset, CSV GEMM lists.

use nmcp_emulator::gpu::workload::{
    dataset_gemms, evaluated_gemms, parse_gemm_csv, DATASET_SEED, DATASET_SIZE, MAX_GEMM_COUNT,
    MAX_GEMM_DIM, MAX_GEMM_ROWS, NETWORKS,
};
use nmcp_isa::gemm_ext::GemmDataType;

#[test]
fn every_network_contributes_and_the_dataset_has_1072_unique_gemms() {
    let eval = evaluated_gemms();
    for net in NETWORKS {
        assert!(
            eval.iter().any(|g| g.app == net.name),
            "{} missing",
            net.name
        );
    }
    // BERT-Large FC-1 forward at 4096 tokens is there, with its backward GEMMs.
    let has = |m, n, k, ta, tb| {
        eval.iter().any(|g| {
            g.app == "bert"
                && (
                    g.shape.m,
                    g.shape.n,
                    g.shape.k,
                    g.shape.trans_a,
                    g.shape.trans_b,
                ) == (m, n, k, ta, tb)
        })
    };
    assert!(has(4096, 4096, 1024, false, false));
    assert!(has(1024, 4096, 4096, true, false));
    assert!(has(4096, 1024, 4096, false, true));
    let d = dataset_gemms(DATASET_SIZE, DATASET_SEED);
    assert_eq!(d.len(), DATASET_SIZE);
    assert_eq!(d, dataset_gemms(DATASET_SIZE, DATASET_SEED));
    let mut labels: Vec<String> = d.iter().map(|s| s.to_string()).collect();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), DATASET_SIZE);
}

#[test]
fn csv_lists_parse_and_errors_name_line_and_column() {
    let ok = parse_gemm_csv(
        "M,N,K,transA,transB,dtype,count\n1024,4096,1024,0,1,f16,2\n# c\n64,64,64,T,N,f32\n",
    )
    .expect("valid");
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[0].1, 2);
    assert!(ok[0].0.trans_b && !ok[0].0.trans_a);
    assert_eq!(ok[1].0.dtype, GemmDataType::F32);
    let e = parse_gemm_csv("1,2,3,0,0,f16\n1,x,3,0,0,f16\n").expect_err("bad N");
    assert_eq!((e.line, e.column), (2, 2));
    let e = parse_gemm_csv("1,2,3,0,0,f8\n").expect_err("bad dtype");
    assert_eq!((e.line, e.column), (1, 6));
    assert!(e.to_string().contains("f8"));
    let e = parse_gemm_csv("1,2,3,0\n").expect_err("short");
    assert_eq!(e.line, 1);
}

/// Each bound of a GEMM list is refused with its line, column and limit, one past it,
/// and accepted at it (BAD_INPUT.md `gemms-above-bound`).
#[test]
fn csv_dimensions_volumes_and_counts_are_bounded() {
    let at = format!("{MAX_GEMM_DIM},{},1,0,0,f32,{MAX_GEMM_COUNT}\n", 1 << 10);
    let ok = parse_gemm_csv(&at).expect("at the bounds");
    assert_eq!(ok[0].1, MAX_GEMM_COUNT);
    let cases = [
        (
            format!("1,{},1,0,0,f16\n", MAX_GEMM_DIM + 1),
            2,
            "N 1048577 is above 1048576",
        ),
        (
            "# big\n1,1,99999999999999999999,0,0,f16\n".to_string(),
            3,
            "K 99999999999999999999 is above 1048576",
        ),
        (
            "1,1,4294967296,0,0,f16\n".to_string(),
            3,
            "K 4294967296 is above 1048576",
        ),
        (
            "1,1,1,0,0,f16,4097\n".to_string(),
            7,
            "count 4097 is above 4096",
        ),
        (
            "1048576,1048576,1048576,0,0,f16\n".to_string(),
            3,
            "M x N x K = 1048576 x 1048576 x 1048576 is above",
        ),
        (
            "-1,1,1,0,0,f16\n".to_string(),
            1,
            "`-1` is not a positive integer",
        ),
    ];
    for (text, column, words) in cases {
        let e = parse_gemm_csv(&text).expect_err(&text);
        assert_eq!(e.column, column, "{text}: {e}");
        assert!(e.to_string().contains(words), "{text}: {e}");
    }
    let e = parse_gemm_csv("1,1,1,0,0,f16\n1,1,17592186044417,0,0,f16\n").expect_err("line 2");
    assert_eq!((e.line, e.column), (2, 3));
    let big = "64,64,64,0,0,f16\n".repeat(MAX_GEMM_ROWS + 1);
    let e = parse_gemm_csv(&big).expect_err("too many rows");
    assert_eq!(e.line, MAX_GEMM_ROWS + 1);
    assert!(e.to_string().contains("more than 65536 GEMMs"), "{e}");
    // The volume is the exact product: 2^44 passes, one more does not.
    assert!(parse_gemm_csv("1048576,1048576,16,0,0,f16\n").is_ok());
    assert!(parse_gemm_csv("1048576,1048576,17,0,0,f16\n").is_err());
}
